"""``deform_roi_pool_forward`` / ``_backward``: RoIAlign (avg, aligned) with learned bin shifts.

mmcv's kernel is RoIAlign's avg mode with the 0.5 pixel shift and no minimum
RoI size, where bin ``(ph, pw)`` of RoI ``n`` starts ``gamma * roi_size *
offset[n, :, ph, pw]`` further. Without an offset (an empty tensor) it is
exactly torchvision's ``roi_align(aligned=True)``; with one, the sample
points are computed by :mod:`.sampling`. The backward writes mmcv's own
formulas, not autograd's: its offset gradient uses the unclamped sample
point with the clamped neighbours, which differs from the true derivative at
the map's border; it is what mmcv trains with.
"""

import torch
from torch import Tensor

from . import sampling
from .roi_align import roi_align_forward


def _geometry(rois: Tensor, pooled_h: int, pooled_w: int, spatial_scale: float,
              sampling_ratio: int) -> sampling.Bins:
    return sampling.bins(rois, pooled_h, pooled_w, spatial_scale, sampling_ratio, 0.5, None)


def _shifts(bins: sampling.Bins, offset: Tensor, gamma: float):
    """Each bin's start shift (R, PH, PW, 1) along h and w: ``gamma * roi_size * offset``."""
    g = torch.tensor(gamma, dtype=offset.dtype)
    roi_w, roi_h = bins.roi_w.view(-1, 1, 1, 1), bins.roi_h.view(-1, 1, 1, 1)
    return g * roi_h * offset[:, 1, :, :, None], g * roi_w * offset[:, 0, :, :, None]


def deform_roi_pool_forward(input: Tensor, rois: Tensor, offset: Tensor, output: Tensor,
                            pooled_height: int, pooled_width: int, spatial_scale: float,
                            sampling_ratio: int, gamma: float) -> None:
    """Fills ``output`` (R, C, PH, PW)."""
    if offset.numel() == 0:
        empty = input.new_zeros(0)
        roi_align_forward(input, rois, output, empty, empty, pooled_height, pooled_width,
                          spatial_scale, sampling_ratio, 1, True)
        return
    geometry = _geometry(rois, pooled_height, pooled_width, spatial_scale, sampling_ratio)
    rows, plane = sampling.rows_of(input), input.shape[2] * input.shape[3]
    for part, bins, gh, gw in sampling.chunks(geometry, pooled_height, pooled_width,
                                              input.shape[1]):
        shift_h, shift_w = _shifts(bins, offset[part], gamma)
        y, x, counted = sampling.points(bins, pooled_height, pooled_width, gh, gw, shift_h, shift_w)
        corners = sampling.corners(y, x, input.shape[2], input.shape[3])
        values = sampling.interpolate(sampling.gather(rows, plane, bins.batch, corners.pos),
                                      corners.weight)  # (r, PH, PW, gh, gw, C)
        values = torch.where(counted[..., None], values, values.new_zeros(()))
        total = sampling.in_order_sum(values.flatten(3, 4), 3)
        count = (bins.grid_h * bins.grid_w).clamp(min=1).to(values.dtype)
        output[part] = (total / count.view(-1, 1, 1, 1)).permute(0, 3, 1, 2)


def deform_roi_pool_backward(grad_output: Tensor, input: Tensor, rois: Tensor, offset: Tensor,
                             grad_input: Tensor, grad_offset: Tensor, pooled_height: int,
                             pooled_width: int, spatial_scale: float, sampling_ratio: int,
                             gamma: float) -> None:
    """Adds the input's gradient into ``grad_input`` and the offset's into ``grad_offset``."""
    geometry = _geometry(rois, pooled_height, pooled_width, spatial_scale, sampling_ratio)
    shifted = offset.numel() > 0
    n, c, h, w = input.shape
    rows, grad_rows = sampling.rows_of(input), grad_input.new_zeros(n * h * w, c)
    for part, bins, gh, gw in sampling.chunks(geometry, pooled_height, pooled_width, c):
        shift_h, shift_w = _shifts(bins, offset[part], gamma) if shifted else (None, None)
        y, x, counted = sampling.points(bins, pooled_height, pooled_width, gh, gw, shift_h, shift_w)
        corners = sampling.corners(y, x, h, w)
        g = sampling.avg_grad(grad_output[part], bins, counted, corners.inside)
        sampling.scatter(grad_rows, h * w, bins.batch, corners.pos, corners.weight[..., None] * g)
        if shifted:
            grad_offset.index_add_(0, part, _offset_grad(rows, h * w, bins, corners, y, x, g,
                                                         gamma))
    sampling.add_rows(grad_input, grad_rows)


def _offset_grad(rows: Tensor, plane: int, bins: sampling.Bins, corners: sampling.Corners,
                 y: Tensor, x: Tensor, g: Tensor, gamma: float) -> Tensor:
    """mmcv's ``ogx``/``ogy`` summed over channels and samples: (r, 2, PH, PW)."""
    v00, v10, v01, v11 = sampling.gather(rows, plane, bins.batch, corners.pos)
    yl, yh = corners.y_low.to(y.dtype)[..., None], corners.y_high.to(y.dtype)[..., None]
    xl, xh = corners.x_low.to(x.dtype)[..., None], corners.x_high.to(x.dtype)[..., None]
    y, x = y[..., None], x[..., None]
    dx = v11 * (y - yl) + v10 * (yh - y) + v01 * (yl - y) + v00 * (y - yh)
    dy = v11 * (x - xl) + v01 * (xh - x) + v10 * (xl - x) + v00 * (x - xh)
    scale = torch.tensor(gamma, dtype=g.dtype)
    roi_w, roi_h = bins.roi_w.view(-1, 1, 1, 1, 1, 1), bins.roi_h.view(-1, 1, 1, 1, 1, 1)
    return torch.stack([(scale * roi_w * g * dx).sum((3, 4, 5)),
                        (scale * roi_h * g * dy).sum((3, 4, 5))], 1)


ENTRY_POINTS = {'deform_roi_pool_forward': deform_roi_pool_forward,
                'deform_roi_pool_backward': deform_roi_pool_backward}
