"""``roi_align_forward`` / ``roi_align_backward`` with mmcv's arguments and out-params.

``pool_mode=1`` (avg, what detectors use) runs torchvision's compiled
``roi_align``: it computes what mmcv's kernel does, for ``aligned`` True and
False alike (both subtract ``0.5 if aligned else 0`` from the scaled corners
and raise an unaligned RoI's sides to 1), sample for sample and in the same
order. ``pool_mode=0`` (max) has no torchvision kernel: it is computed here,
vectorised over RoIs, bins, samples and channels (:mod:`.sampling`), with
mmcv's ``argmax_y``/``argmax_x`` (the sample point that won, -1 for none)
that its backward reads. A dtype torchvision lacks on a device (bfloat16 on
CPU) takes the vectorised path for avg too.
"""

from typing import Tuple

import torch
from torch import Tensor
import torchvision  # noqa: F401  (registers torch.ops.torchvision)

from . import sampling

#: mmcv's initial max: ``-10000`` in its CPU kernel, ``-FLT_MAX`` in its CUDA kernel.
MAX_INIT = {'cpu': -10000.0, 'cuda': -torch.finfo(torch.float32).max}


def _torchvision_takes(t: Tensor) -> bool:
    return t.dtype in (torch.float32, torch.float64, torch.float16)


def roi_align_forward(input: Tensor, rois: Tensor, output: Tensor, argmax_y: Tensor,
                      argmax_x: Tensor, aligned_height: int, aligned_width: int,
                      spatial_scale: float, sampling_ratio: int, pool_mode: int,
                      aligned: bool) -> None:
    """Fills ``output`` (R, C, PH, PW) (and ``argmax_y``/``argmax_x`` for max)."""
    if pool_mode == 1 and _torchvision_takes(input):
        output.copy_(torch.ops.torchvision.roi_align(
            input, rois, spatial_scale, aligned_height, aligned_width, sampling_ratio, aligned))
        return
    out, ay, ax = pool(input, rois, aligned_height, aligned_width, spatial_scale,
                       sampling_ratio, pool_mode, aligned)
    output.copy_(out)
    if pool_mode == 0:
        argmax_y.copy_(ay)
        argmax_x.copy_(ax)


def roi_align_backward(grad_output: Tensor, rois: Tensor, argmax_y: Tensor, argmax_x: Tensor,
                       grad_input: Tensor, aligned_height: int, aligned_width: int,
                       spatial_scale: float, sampling_ratio: int, pool_mode: int,
                       aligned: bool) -> None:
    """Adds the gradient of the input into ``grad_input`` (N, C, H, W)."""
    n, c, h, w = grad_input.shape
    if pool_mode == 0:
        _max_backward(grad_output, rois, argmax_y, argmax_x, grad_input)
    elif _torchvision_takes(grad_output):
        grad_input.add_(torch.ops.torchvision._roi_align_backward(
            grad_output, rois, spatial_scale, aligned_height, aligned_width, n, c, h, w,
            sampling_ratio, aligned))
    else:
        _avg_backward(grad_output, rois, grad_input, spatial_scale, sampling_ratio, aligned)


def pool(input: Tensor, rois: Tensor, pooled_h: int, pooled_w: int, spatial_scale: float,
         sampling_ratio: int, pool_mode: int, aligned: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """The vectorised RoIAlign: (output, argmax_y, argmax_x), each (R, C, PH, PW)."""
    c = input.shape[1]
    out = input.new_zeros((rois.shape[0], c, pooled_h, pooled_w))
    ay, ax = torch.full_like(out, -1.0), torch.full_like(out, -1.0)
    rows = sampling.rows_of(input)
    geometry = _bins(rois, pooled_h, pooled_w, spatial_scale, sampling_ratio, aligned)
    for part, bins, gh, gw in sampling.chunks(geometry, pooled_h, pooled_w, c):
        out[part], ay[part], ax[part] = _pool_chunk(input, rows, bins, pooled_h, pooled_w, gh,
                                                    gw, pool_mode)
    return out, ay, ax


def _bins(rois: Tensor, pooled_h: int, pooled_w: int, spatial_scale: float,
          sampling_ratio: int, aligned: bool) -> sampling.Bins:
    return sampling.bins(rois, pooled_h, pooled_w, spatial_scale, sampling_ratio,
                         0.5 if aligned else 0.0, None if aligned else 1.0)


def _samples(input: Tensor, rows: Tensor, bins: sampling.Bins, pooled_h: int, pooled_w: int,
             gh: int, gw: int):
    """Values (R, PH, PW, gh*gw, C), the points' y and x, and which samples count."""
    y, x, counted = sampling.points(bins, pooled_h, pooled_w, gh, gw)
    h, w = input.shape[2:]
    corners = sampling.corners(y, x, h, w)
    values = sampling.interpolate(sampling.gather(rows, h * w, bins.batch, corners.pos),
                                  corners.weight)
    shape = (values.shape[0], pooled_h, pooled_w, gh * gw)
    return (values.reshape(shape + (-1, )), y.expand(shape[:3] + (gh, gw)).reshape(shape),
            x.expand(shape[:3] + (gh, gw)).reshape(shape),
            counted.expand(shape[:3] + (gh, gw)).reshape(shape))


def _pool_chunk(input: Tensor, rows: Tensor, bins: sampling.Bins, pooled_h: int, pooled_w: int,
                gh: int, gw: int, pool_mode: int) -> Tuple[Tensor, Tensor, Tensor]:
    values, y, x, counted = _samples(input, rows, bins, pooled_h, pooled_w, gh, gw)
    if pool_mode == 1:
        count = (bins.grid_h * bins.grid_w).clamp(min=1).to(values.dtype)
        total = sampling.in_order_sum(
            torch.where(counted[..., None], values, values.new_zeros(())), 3)
        out = total / count.view(-1, 1, 1, 1)
        return out.permute(0, 3, 1, 2), -1.0, -1.0
    best, arg = torch.where(counted[..., None], values, float('-inf')).max(3)
    init = MAX_INIT.get(input.device.type, MAX_INIT['cuda'])
    won = best > init  # mmcv keeps its initial value (and -1 coordinates) otherwise
    out = torch.where(won, best, init)
    ay = torch.where(won, torch.gather(y, 3, arg), -1.0)  # the winning sample's point
    ax = torch.where(won, torch.gather(x, 3, arg), -1.0)
    return out.permute(0, 3, 1, 2), ay.permute(0, 3, 1, 2), ax.permute(0, 3, 1, 2)


def _max_backward(grad_output: Tensor, rois: Tensor, argmax_y: Tensor, argmax_x: Tensor,
                  grad_input: Tensor) -> None:
    n, c, h, w = grad_input.shape
    corners = sampling.corners(argmax_y, argmax_x, h, w)
    weight = corners.weight * (argmax_y != -1.0)  # mmcv skips a bin no sample won
    plane = rois[:, 0].long().view(-1, 1, 1, 1) * c + torch.arange(
        c, device=rois.device).view(1, -1, 1, 1)
    index = plane * (h * w) + corners.pos
    # corners last: the adds happen bin by bin, four at a time, in mmcv's order (same sums)
    grad_input.view(-1).index_add_(0, index.movedim(0, -1).reshape(-1),
                                   (grad_output * weight).movedim(0, -1).reshape(-1)
                                   .to(grad_input.dtype))


def _avg_backward(grad_output: Tensor, rois: Tensor, grad_input: Tensor, spatial_scale: float,
                  sampling_ratio: int, aligned: bool) -> None:
    """The vectorised avg backward (dtypes torchvision lacks), as mmcv's kernel scatters."""
    n, c, h, w = grad_input.shape
    ph, pw = grad_output.shape[2:]
    rows = grad_input.new_zeros(n * h * w, c)
    geometry = _bins(rois, ph, pw, spatial_scale, sampling_ratio, aligned)
    for part, bins, gh, gw in sampling.chunks(geometry, ph, pw, c):
        y, x, counted = sampling.points(bins, ph, pw, gh, gw)
        corners = sampling.corners(y, x, h, w)
        g = sampling.avg_grad(grad_output[part], bins, counted, corners.inside)
        sampling.scatter(rows, h * w, bins.batch, corners.pos, corners.weight[..., None] * g)
    sampling.add_rows(grad_input, rows)


ENTRY_POINTS = {'roi_align_forward': roi_align_forward, 'roi_align_backward': roi_align_backward}
