"""``roi_align_rotated_forward`` / ``_backward``: RoIAlign over rotated RoIs, vectorised.

A rotated RoI is ``(batch, cx, cy, w, h, angle)``. mmcv's kernel lays the
``grid_h x grid_w`` samples of each bin out in the RoI's own frame (origin at
its centre, starting at ``-h/2, -w/2``), turns them by ``-angle`` (clockwise,
the default) or ``angle``, shifts them to the centre and reads them
bilinearly (the roi_align interpolation: :mod:`.sampling`). The forward
averages a bin's samples (``count = max(grid_h * grid_w, 1)``), the backward
scatters ``grad * w / count``. Both run here on all RoIs, bins, samples and
channels of a chunk at once, with mmcv's float operations in mmcv's order
(samples summed one after another, and the backward's adds ordered RoI, bin,
sample, corner as its loop makes them), so fp32/fp64 results on CPU are
mmcv's. Half types are computed in float32 and rounded once.
"""

import torch
from torch import Tensor

from . import sampling


def _dtype(t: Tensor) -> torch.dtype:
    return t.dtype if t.dtype in (torch.float32, torch.float64) else torch.float32


def _geometry(rois: Tensor, pooled_h: int, pooled_w: int, spatial_scale: float,
              sampling_ratio: int, aligned: bool, clockwise: bool):
    """Per RoI (R, 1, 1, 1): :class:`sampling.Bins` in the RoI frame, centre, cos and sin."""
    view = (-1, 1, 1, 1)
    scale = torch.tensor(spatial_scale, dtype=torch.float32).to(rois.dtype)  # a C float
    centre_w = (rois[:, 1] * scale - (0.5 if aligned else 0.0)).view(view)
    centre_h = (rois[:, 2] * scale - (0.5 if aligned else 0.0)).view(view)
    roi_w, roi_h = (rois[:, 3] * scale).view(view), (rois[:, 4] * scale).view(view)
    if not aligned:  # mmcv: "for backward-compatibility only"
        roi_w, roi_h = roi_w.clamp(min=1.0), roi_h.clamp(min=1.0)
    elif rois.numel() and bool((roi_w < 0).any() | (roi_h < 0).any()):
        raise ValueError('roi_align_rotated: RoIs with aligned=True need non-negative w and h.')
    theta = rois[:, 5].view(view)
    theta = -theta if clockwise else theta
    cos, sin = torch.cos(theta.double()).to(rois.dtype), torch.sin(theta.double()).to(rois.dtype)
    bin_h, bin_w = roi_h / pooled_h, roi_w / pooled_w
    if sampling_ratio > 0:
        grid_h = grid_w = torch.full_like(bin_h, sampling_ratio, dtype=torch.long)
    else:
        grid_h, grid_w = bin_h.ceil().long(), bin_w.ceil().long()
    bins = sampling.Bins(rois[:, 0].long(), -roi_h / 2, -roi_w / 2, roi_h, roi_w, bin_h, bin_w,
                         grid_h, grid_w)
    return bins, (centre_h, centre_w, cos, sin)


def _samples(bins: sampling.Bins, frame, pooled_h: int, pooled_w: int, gh: int, gw: int,
             height: int, width: int) -> sampling.Corners:
    """Corners of the turned sample points (4, r, PH, PW, gh, gw); padding samples weigh 0."""
    centre_h, centre_w, cos, sin = (t[..., None] for t in frame)
    yy = sampling.coords(bins.start_h, bins.bin_h, bins.grid_h, pooled_h, gh, True)[..., None]
    xx = sampling.coords(bins.start_w, bins.bin_w, bins.grid_w, pooled_w, gw, False)[
        ..., None, :]
    y = (yy * cos - xx * sin) + centre_h
    x = (yy * sin + xx * cos) + centre_w
    corners = sampling.corners(y, x, height, width)
    iy = torch.arange(gh, device=y.device).view(1, 1, 1, -1, 1)
    ix = torch.arange(gw, device=y.device).view(1, 1, 1, 1, -1)
    counted = (iy < bins.grid_h[..., None]) & (ix < bins.grid_w[..., None])
    return corners._replace(weight=torch.where(counted & corners.inside, corners.weight, 0.0))


def _chunks(rois: Tensor, pooled_h: int, pooled_w: int, channels: int, *args,
            budget: int = 1 << 24):
    """(RoI indices, Bins, frame, gh, gw) over consecutive RoIs, in RoI order.

    Unlike :func:`sampling.chunks` (grouped by grid size), RoIs stay in their
    order so the backward's adds into a shared cell come as mmcv's loop makes
    them; a RoI whose adaptive grid is smaller than its chunk's largest has
    its extra samples weighted 0 (adding 0 leaves a sum as it is).
    """
    bins, frame = _geometry(rois, pooled_h, pooled_w, *args)
    grid_h, grid_w = bins.grid_h.view(-1).clamp(min=1), bins.grid_w.view(-1).clamp(min=1)
    per_roi = 4 * pooled_h * pooled_w * max(channels, 1)
    step = max(1, budget // (per_roi * int((grid_h * grid_w).max()))) if rois.numel() else 1
    for start in range(0, rois.shape[0], step):
        part = slice(start, start + step)
        yield (part, sampling.Bins(*(t[part] for t in bins)), tuple(t[part] for t in frame),
               int(grid_h[part].max()), int(grid_w[part].max()))


def roi_align_rotated_forward(input: Tensor, rois: Tensor, output: Tensor, pooled_height: int,
                              pooled_width: int, spatial_scale: float, sampling_ratio: int,
                              aligned: bool, clockwise: bool) -> None:
    """Fills ``output`` (R, C, PH, PW) from ``input`` (N, C, H, W) and ``rois`` (R, 6)."""
    dtype = _dtype(input)
    x, rois = input.to(dtype), rois.to(dtype)
    n, c, h, w = x.shape
    rows = sampling.rows_of(x)
    out = x.new_zeros(rois.shape[0], pooled_height, pooled_width, c)
    for part, bins, frame, gh, gw in _chunks(rois, pooled_height, pooled_width, c,
                                             spatial_scale, sampling_ratio, aligned, clockwise):
        corners = _samples(bins, frame, pooled_height, pooled_width, gh, gw, h, w)
        values = sampling.interpolate(sampling.gather(rows, h * w, bins.batch, corners.pos),
                                      corners.weight)
        total = sampling.in_order_sum(values.flatten(3, 4), 3)
        count = (bins.grid_h * bins.grid_w).clamp(min=1).to(dtype)
        out[part] = total / count
    output.copy_(out.permute(0, 3, 1, 2))


def roi_align_rotated_backward(grad_output: Tensor, rois: Tensor, grad_input: Tensor,
                               pooled_height: int, pooled_width: int, spatial_scale: float,
                               sampling_ratio: int, aligned: bool, clockwise: bool) -> None:
    """Adds the gradient of the input into ``grad_input`` (N, C, H, W)."""
    dtype = _dtype(grad_output)
    grad, rois = grad_output.to(dtype).permute(0, 2, 3, 1), rois.to(dtype)
    n, c, h, w = grad_input.shape
    rows = torch.zeros(n * h * w, c, dtype=dtype, device=grad_input.device)
    for part, bins, frame, gh, gw in _chunks(rois, pooled_height, pooled_width, c,
                                             spatial_scale, sampling_ratio, aligned, clockwise):
        corners = _samples(bins, frame, pooled_height, pooled_width, gh, gw, h, w)
        # mmcv divides by grid_h * grid_w unclamped; a grid of 0 has no sample to divide
        count = (bins.grid_h * bins.grid_w).clamp(min=1).to(dtype).view(-1, 1, 1, 1, 1, 1)
        weight = corners.weight.movedim(0, -1)[..., None]  # (r, PH, PW, gh, gw, 4, 1)
        g = grad[part][:, :, :, None, None, None, :] * weight / count[..., None]
        pos = (bins.batch.view(-1, 1, 1, 1, 1) * (h * w) + corners.pos).movedim(0, -1)
        # corners last, channels innermost: each cell's adds come in mmcv's loop order
        rows.index_add_(0, pos.reshape(-1), g.reshape(-1, c))
    sampling.add_rows(grad_input, rows.to(grad_input.dtype))


ENTRY_POINTS = {'roi_align_rotated_forward': roi_align_rotated_forward,
                'roi_align_rotated_backward': roi_align_rotated_backward}
