"""Bilinear sampling on RoI bins in mmcv's arithmetic (roi_align max mode, deform_roi_pool).

mmcv's RoIAlign-style kernels place ``grid_h x grid_w`` sample points in each
of ``pooled_h x pooled_w`` bins of a RoI and read each point bilinearly. This
computes the same points and weights with the same float operations in the
same order, for all RoIs of a chunk at once: a RoI whose adaptive grid
(``sampling_ratio=0``: ``ceil(roi_size / pooled_size)``) is smaller than the
chunk's largest has its extra samples masked out.
"""

from typing import NamedTuple, Optional

import torch
from torch import Tensor


class Bins(NamedTuple):
    """Per RoI (shapes (R, 1, 1, 1) so they broadcast over bins and samples)."""
    batch: Tensor       # image index, long
    start_h: Tensor     # top edge (feature coordinates), input dtype
    start_w: Tensor
    roi_h: Tensor
    roi_w: Tensor
    bin_h: Tensor
    bin_w: Tensor
    grid_h: Tensor      # samples per bin, long
    grid_w: Tensor


def bins(rois: Tensor, pooled_h: int, pooled_w: int, spatial_scale: float,
         sampling_ratio: int, offset: float, min_size: Optional[float]) -> Bins:
    """The bin geometry of each RoI, as mmcv's kernels compute it.

    Args:
        rois: (R, 5) ``(batch, x1, y1, x2, y2)`` in image coordinates.
        offset: subtracted from the scaled corners (0.5 for ``aligned``).
        min_size: RoI sides are raised to this (1 for ``aligned=False``) or
            left as they are (None).
    """
    scale = torch.tensor(spatial_scale, dtype=rois.dtype)  # a C float, as mmcv's pybind takes it
    view = (-1, 1, 1, 1)
    corners = rois[:, 1:5] * scale - offset
    start_w, start_h, end_w, end_h = (corners[:, k].view(view) for k in range(4))
    roi_w, roi_h = end_w - start_w, end_h - start_h
    if min_size is not None:
        roi_w, roi_h = roi_w.clamp(min=min_size), roi_h.clamp(min=min_size)
    bin_h, bin_w = roi_h / pooled_h, roi_w / pooled_w
    if sampling_ratio > 0:
        grid_h = grid_w = torch.full_like(bin_h, sampling_ratio, dtype=torch.long)
    else:
        grid_h, grid_w = bin_h.ceil().long(), bin_w.ceil().long()
    return Bins(rois[:, 0].long(), start_h, start_w, roi_h, roi_w, bin_h, bin_w, grid_h, grid_w)


def coords(start: Tensor, bin_size: Tensor, grid: Tensor, pooled: int, samples: int,
           along_h: bool) -> Tensor:
    """Sample coordinates ``start + p * bin + (i + .5) * bin / grid``.

    Shape (R, pooled, 1, samples) for ``along_h``, else (R, 1, pooled, samples);
    ``start`` may already vary per bin (deform_roi_pool's offsets).
    """
    shape = (1, -1, 1, 1) if along_h else (1, 1, -1, 1)
    p = torch.arange(pooled, device=start.device).to(start.dtype).view(shape)
    i = torch.arange(samples, device=start.device).to(start.dtype).view(1, 1, 1, -1) + 0.5
    return (start + p * bin_size) + i * bin_size / grid.to(start.dtype)


def points(bins: Bins, pooled_h: int, pooled_w: int, gh: int, gw: int,
           shift_h: Optional[Tensor] = None, shift_w: Optional[Tensor] = None):
    """Sample points ``y`` (R, PH, PW?, gh, 1), ``x`` (R, PH?, PW, 1, gw) and ``counted``.

    ``gh``/``gw`` are the chunk's largest grid; ``counted`` (R, 1, 1, gh, gw)
    masks the samples beyond a RoI's own grid. ``shift_h``/``shift_w``
    (R, PH, PW, 1) move each bin's start (deform_roi_pool).
    """
    start_h = bins.start_h if shift_h is None else bins.start_h + shift_h
    start_w = bins.start_w if shift_w is None else bins.start_w + shift_w
    y = coords(start_h, bins.bin_h, bins.grid_h, pooled_h, gh, True)[..., None]
    x = coords(start_w, bins.bin_w, bins.grid_w, pooled_w, gw, False)[..., None, :]
    iy = torch.arange(gh, device=y.device).view(1, 1, 1, -1, 1)
    ix = torch.arange(gw, device=y.device).view(1, 1, 1, 1, -1)
    counted = (iy < bins.grid_h[..., None]) & (ix < bins.grid_w[..., None])
    return y, x, counted


def in_order_sum(values: Tensor, dim: int) -> Tensor:
    """Sum over ``dim`` one sample after another, as mmcv's kernels add (same rounding).

    The loop is over sample slots (``grid_h * grid_w``, a handful), each step
    vectorised over every RoI, bin and channel; ``.sum(dim)`` would round
    differently.
    """
    total = values.select(dim, 0)
    for s in range(1, values.shape[dim]):
        total = total + values.select(dim, s)
    return total


class Corners(NamedTuple):
    """The 4 neighbours of each sample point and their weights (mmcv's w1..w4)."""
    pos: Tensor      # (4, ...) flat index y * W + x into one feature map
    weight: Tensor   # (4, ...) 0 for a point outside [-1, H] x [-1, W]
    inside: Tensor   # (...) bool
    y: Tensor        # the clamped coordinates (for deform_roi_pool's offset gradient)
    x: Tensor
    y_low: Tensor
    x_low: Tensor
    y_high: Tensor
    x_high: Tensor


def _axis(v: Tensor, size: int):
    v = v.clamp(min=0)
    low = v.long()
    edge = low >= size - 1
    low = torch.where(edge, size - 1, low)
    high = torch.where(edge, size - 1, low + 1)
    v = torch.where(edge, low.to(v.dtype), v)
    return v, low, high


def corners(y: Tensor, x: Tensor, height: int, width: int) -> Corners:
    """Bilinear neighbours and weights of points ``(y, x)`` (broadcast together)."""
    # mmcv: a point is outside if y < -1 or y > H (or x ...); written this way round, a NaN
    # (a padding sample past a RoI's own grid, whose grid may be 0) is outside too
    inside = (y >= -1.0) & (y <= height) & (x >= -1.0) & (x <= width)
    y, y_low, y_high = _axis(y, height)
    x, x_low, x_high = _axis(x, width)
    ly, lx = y - y_low.to(y.dtype), x - x_low.to(x.dtype)
    hy, hx = 1. - ly, 1. - lx
    weight = torch.stack(torch.broadcast_tensors(hy * hx, hy * lx, ly * hx, ly * lx))
    weight = torch.where(inside, weight, weight.new_zeros(()))
    pos = torch.stack(torch.broadcast_tensors(y_low * width + x_low, y_low * width + x_high,
                                              y_high * width + x_low, y_high * width + x_high))
    pos = torch.where(inside, pos, 0)
    return Corners(pos, weight, inside, y, x, y_low, x_low, y_high, x_high)


def rows_of(features: Tensor) -> Tensor:
    """``features`` (N, C, H, W) as (N * H * W, C) rows: one copy per call, shared by chunks."""
    n, c, h, w = features.shape
    return features.permute(0, 2, 3, 1).reshape(n * h * w, c)


def _index(batch: Tensor, pos: Tensor, plane: int) -> Tensor:
    return batch.view((1, -1) + (1, ) * (pos.dim() - 2)) * plane + pos


def gather(rows: Tensor, plane: int, batch: Tensor, pos: Tensor) -> Tensor:
    """:func:`rows_of` read at ``pos`` (4, R, ...) of image ``batch`` (R): (4, R, ..., C).

    ``plane`` is ``H * W``.
    """
    return rows[_index(batch, pos, plane)]


def interpolate(values: Tensor, weight: Tensor) -> Tensor:
    """mmcv's ``w1 * v1 + w2 * v2 + w3 * v3 + w4 * v4``, summed in that order: (R, ..., C)."""
    w = weight.unsqueeze(-1)
    return ((w[0] * values[0] + w[1] * values[1]) + w[2] * values[2]) + w[3] * values[3]


def scatter(rows: Tensor, plane: int, batch: Tensor, pos: Tensor, grad: Tensor) -> None:
    """Adds ``grad`` (4, R, ..., C) at ``pos`` of image ``batch`` into ``rows`` (N * H * W, C)."""
    rows.index_add_(0, _index(batch, pos, plane).reshape(-1), grad.reshape(-1, rows.shape[1]))


def add_rows(grad_input: Tensor, rows: Tensor) -> None:
    """Adds ``rows`` (N * H * W, C) into ``grad_input`` (N, C, H, W)."""
    n, c, h, w = grad_input.shape
    grad_input.add_(rows.view(n, h, w, c).permute(0, 3, 1, 2))


def chunks(geometry: Bins, pooled_h: int, pooled_w: int, channels: int, budget: int = 1 << 24):
    """(RoI indices, their Bins, gh, gw): the RoIs grouped by grid size, in bounded chunks.

    RoIs of one chunk share their ``grid_h x grid_w`` (a handful of distinct
    sizes in a batch), so no sample is padding; a chunk holds at most
    ``budget`` elements of the (4 corners, RoI, bin, sample, channel) tensor,
    which bounds the memory of the vectorised paths.
    """
    grid_h, grid_w = geometry.grid_h.view(-1).clamp(min=1), geometry.grid_w.view(-1).clamp(min=1)
    key = grid_h * (int(grid_w.max()) + 1 if grid_w.numel() else 1) + grid_w
    for value in key.unique().tolist():  # a loop over distinct grid sizes, not over RoIs
        members = (key == value).nonzero()[:, 0]
        gh, gw = int(grid_h[members[0]]), int(grid_w[members[0]])
        step = max(1, budget // (4 * pooled_h * pooled_w * gh * gw * max(channels, 1)))
        for start in range(0, members.numel(), step):
            part = members[start:start + step]
            yield part, Bins(*(t[part] for t in geometry)), gh, gw


def avg_grad(grad_output: Tensor, bins: Bins, counted: Tensor, inside: Tensor) -> Tensor:
    """Each sample's share ``grad / (grid_h * grid_w)`` (r, PH, PW, gh, gw, C), 0 where unused.

    mmcv's avg backward: ``count`` without the forward's ``max(count, 1)``,
    and nothing for a point outside the map.
    """
    count = (bins.grid_h * bins.grid_w).to(grad_output.dtype).view(-1, 1, 1, 1, 1, 1)
    g = grad_output.permute(0, 2, 3, 1)[:, :, :, None, None, :] / count
    return torch.where((counted & inside)[..., None], g, g.new_zeros(()))
