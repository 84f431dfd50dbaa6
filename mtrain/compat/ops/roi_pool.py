"""``roi_pool_forward`` / ``roi_pool_backward``: mmcv's RoIPool, vectorised over RoIs and bins.

torchvision's ``roi_pool`` rounds the scaled RoI corners to integers
(Fast R-CNN's Caffe kernel); mmcv's kernel does not: it scales
``(x1, y1, x2 + 1, y2 + 1)``, cuts the RoI into equal float bins and takes
``floor``/``ceil`` of each bin's edges. The two differ whenever a scaled
corner is not an integer, so this computes mmcv's windows, then the max over
each window (the first maximum in row-major order, as mmcv's scan keeps) and
its flat index ``h * W + w`` (``argmax``; -1 for an empty window, which
outputs 0). A RoI of zero or negative size is skipped, leaving the
out-params as mmcv's wrapper made them (zeros), as mmcv's kernel does.
"""

import torch
from torch import Tensor

FLT_MAX = torch.finfo(torch.float32).max
#: Elements of the window tensor per chunk of RoIs.
CHUNK_ELEMENTS = 1 << 24


def _windows(rois: Tensor, pooled_h: int, pooled_w: int, spatial_scale: float,
             height: int, width: int):
    """Each bin's ``[y1, y2) x [x1, x2)`` (R, PH, 1) / (R, 1, PW) and which RoIs count."""
    scale = torch.tensor(spatial_scale, dtype=rois.dtype)
    x1, y1 = rois[:, 1] * scale, rois[:, 2] * scale
    x2, y2 = (rois[:, 3] + 1) * scale, (rois[:, 4] + 1) * scale
    roi_w, roi_h = x2 - x1, y2 - y1
    bin_w, bin_h = roi_w / pooled_w, roi_h / pooled_h

    def edges(pooled: int, size: Tensor, start: Tensor, limit: int):
        p = torch.arange(pooled + 1, device=rois.device).to(rois.dtype)
        lo = (p[None, :-1] * size[:, None] + start[:, None]).floor()
        hi = (p[None, 1:] * size[:, None] + start[:, None]).ceil()
        return lo.long().clamp(0, limit), hi.long().clamp(0, limit)

    wy1, wy2 = edges(pooled_h, bin_h, y1, height)
    wx1, wx2 = edges(pooled_w, bin_w, x1, width)
    return wy1[:, :, None], wy2[:, :, None], wx1[:, None, :], wx2[:, None, :], \
        (roi_w > 0) & (roi_h > 0)


def roi_pool_forward(input: Tensor, rois: Tensor, output: Tensor, argmax: Tensor,
                     pooled_height: int, pooled_width: int, spatial_scale: float) -> None:
    """Fills ``output`` (R, C, PH, PW) and ``argmax`` (int32, flat index in the map)."""
    n, c, h, w = input.shape
    if rois.shape[0] == 0:
        return
    wy1, wy2, wx1, wx2, valid = _windows(rois, pooled_height, pooled_width, spatial_scale, h, w)
    span_h, span_w = max(int((wy2 - wy1).max()), 1), max(int((wx2 - wx1).max()), 1)
    rows = input.permute(0, 2, 3, 1).reshape(n * h * w, c)
    step = max(1, CHUNK_ELEMENTS // (pooled_height * pooled_width * span_h * span_w * max(c, 1)))
    dy = torch.arange(span_h, device=input.device).view(1, 1, 1, -1, 1)
    dx = torch.arange(span_w, device=input.device).view(1, 1, 1, 1, -1)
    for start in range(0, rois.shape[0], step):  # chunks of RoIs, not single ones
        part = slice(start, start + step)
        y, x = wy1[part, ..., None, None] + dy, wx1[part, ..., None, None] + dx
        inside = (y < wy2[part, ..., None, None]) & (x < wx2[part, ..., None, None])
        pos = torch.where(inside, y * w + x, 0)  # (r, PH, PW, span_h, span_w)
        batch = rois[part, 0].long().view(-1, 1, 1, 1, 1)
        values = rows[batch * (h * w) + pos].flatten(3, 4)  # (r, PH, PW, S, C)
        values = torch.where(inside.flatten(3, 4)[..., None], values, float('-inf'))
        best, arg = values.max(3)  # the first maximum, as mmcv's strict '>' scan
        won = best > -FLT_MAX
        empty = ~inside.flatten(3, 4).any(3)[..., None]
        out = torch.where(won, best, torch.where(empty, 0.0, -FLT_MAX))
        idx = torch.where(won, torch.gather(pos.flatten(3, 4), 3, arg), -1)
        keep = valid[part].view(-1, 1, 1, 1)
        output[part] = torch.where(keep, out.permute(0, 3, 1, 2).to(output.dtype), output[part])
        argmax[part] = torch.where(keep, idx.permute(0, 3, 1, 2).to(argmax.dtype), argmax[part])


def roi_pool_backward(grad_output: Tensor, rois: Tensor, argmax: Tensor, grad_input: Tensor,
                      pooled_height: int, pooled_width: int, spatial_scale: float) -> None:
    """Adds ``grad_output`` at each bin's ``argmax`` into ``grad_input`` (N, C, H, W)."""
    n, c, h, w = grad_input.shape
    plane = rois[:, 0].long().view(-1, 1, 1, 1) * c + torch.arange(
        c, device=rois.device).view(1, -1, 1, 1)
    taken = argmax != -1
    index = plane * (h * w) + argmax.long().clamp(min=0)
    grad = torch.where(taken, grad_output, grad_output.new_zeros(()))
    grad_input.view(-1).index_add_(0, index.reshape(-1), grad.reshape(-1).to(grad_input.dtype))


ENTRY_POINTS = {'roi_pool_forward': roi_pool_forward, 'roi_pool_backward': roi_pool_backward}
