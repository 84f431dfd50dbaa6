"""``ms_deform_attn_forward/backward`` of ``mmcv._ext`` (Deformable DETR) on ``grid_sample``.

mmcv 1.7.2's kernel samples each level's value map bilinearly at
``loc * size - 0.5`` (pixel centres), zero outside ``(-1, size)``: exactly
``F.grid_sample(..., align_corners=False, padding_mode='zeros')`` at
``2 * loc - 1``. The forward samples every level with one ``grid_sample``
call and sums the samples with an ``einsum`` over levels and points; the
backward differentiates that same computation with autograd. The level loop is
over the few feature levels (4 in Deformable DETR), never over queries or
pixels. ``im2col_step`` only batches mmcv's kernel and changes no number.

Shapes (as mmcv's ``MultiScaleDeformableAttnFunction`` passes them): value
``(bs, keys, heads, dims)``, spatial_shapes ``(levels, 2)`` as (h, w),
level_start_index ``(levels,)``, sampling_loc ``(bs, queries, heads, levels,
points, 2)`` as (x, y) in [0, 1], attn_weight ``(bs, queries, heads, levels,
points)``; the output is ``(bs, queries, heads * dims)``.
"""

import torch
import torch.nn.functional as F
from torch import Tensor


def attend(value: Tensor, spatial_shapes: Tensor, level_start_index: Tensor,
           sampling_loc: Tensor, attn_weight: Tensor) -> Tensor:
    """Multi-scale deformable attention, differentiable in value, locations and weights."""
    bs, _, heads, dims = value.shape
    queries, levels, points = sampling_loc.shape[1], sampling_loc.shape[3], sampling_loc.shape[4]
    grid = (2 * sampling_loc - 1).transpose(1, 2).flatten(0, 1)  # bs*heads, q, levels, p, 2
    sampled = []
    for level, ((h, w), start) in enumerate(zip(spatial_shapes.tolist(),
                                                level_start_index.tolist())):
        v = value[:, start:start + h * w].permute(0, 2, 3, 1).reshape(bs * heads, dims, h, w)
        sampled.append(F.grid_sample(v, grid[:, :, level], mode='bilinear',
                                     padding_mode='zeros', align_corners=False))
    sampled = torch.stack(sampled, dim=3).view(bs, heads, dims, queries, levels, points)
    out = torch.einsum('bhdqlp,bqhlp->bqhd', sampled, attn_weight)
    return out.reshape(bs, queries, heads * dims)


def ms_deform_attn_forward(value: Tensor, spatial_shapes: Tensor, level_start_index: Tensor,
                           sampling_loc: Tensor, attn_weight: Tensor,
                           im2col_step: int) -> Tensor:
    """The attention output, a new tensor (mmcv's entry point returns it)."""
    return attend(value, spatial_shapes, level_start_index, sampling_loc, attn_weight)


def ms_deform_attn_backward(value: Tensor, spatial_shapes: Tensor, level_start_index: Tensor,
                            sampling_loc: Tensor, attn_weight: Tensor, grad_output: Tensor,
                            grad_value: Tensor, grad_sampling_loc: Tensor,
                            grad_attn_weight: Tensor, im2col_step: int) -> None:
    """Adds the gradients into ``grad_value``, ``grad_sampling_loc``, ``grad_attn_weight``."""
    with torch.enable_grad():
        leaves = [t.detach().requires_grad_() for t in (value, sampling_loc, attn_weight)]
        out = attend(leaves[0], spatial_shapes, level_start_index, leaves[1], leaves[2])
        grads = torch.autograd.grad(out, leaves, grad_output)
    for into, grad in zip((grad_value, grad_sampling_loc, grad_attn_weight), grads):
        into.add_(grad)


ENTRY_POINTS = {
    'ms_deform_attn_forward': ms_deform_attn_forward,
    'ms_deform_attn_backward': ms_deform_attn_backward,
}
