"""``carafe_*`` and ``carafe_naive_*`` of ``mmcv._ext`` (content-aware upsampling) in PyTorch.

Both of mmcv 1.7.2's kernels compute the same thing (the "naive" one in NCHW,
the other through NHWC copies ``rfeatures``/``routput``/``rmasks``): output
pixel ``(y, x)`` of channel ``c`` is
``sum_{i,j} mask[g*k*k + i*k + j, y, x] * feat[c, y//s + i - r, x//s + j - r]``
with ``r = (k - 1) // 2``, zero outside the map, and ``g`` the channel's group
(``c // (C / group_size)``). Here it is a loop over the ``k*k`` kernel points,
each a broadcast multiply-add over the whole batch at the low resolution
viewed as ``(H, s, W, s)``, so no ``C*k*k``-fold unfolded copy is ever held.
The backward is written out the same way (the mask gradient sums over a
group's channels, the feature gradient over each ``s x s`` block), not taped.
"""

from typing import Iterator, Tuple

import torch.nn.functional as F
from torch import Tensor


def _points(features: Tensor, masks: Tensor, kernel_size: int, group_size: int,
            scale_factor: int) -> Iterator[Tuple[int, int, Tensor, Tensor]]:
    """For each kernel point ``(i, j)``: the shifted features and that point's mask, viewed
    ``(n, groups, c/groups, h, 1, w, 1)`` and ``(n, groups, 1, h, s, w, s)``."""
    n, c, h, w = features.shape
    s, r = scale_factor, (kernel_size - 1) // 2
    padded = F.pad(features, (r, r, r, r)).view(n, group_size, c // group_size, h + 2 * r,
                                                w + 2 * r)
    m = masks.view(n, group_size, kernel_size * kernel_size, h, s, w, s)
    for i in range(kernel_size):
        for j in range(kernel_size):
            f = padded[:, :, :, i:i + h, j:j + w].unsqueeze(4).unsqueeze(6)
            yield i, j, f, m[:, :, i * kernel_size + j].unsqueeze(2)


def carafe(features: Tensor, masks: Tensor, kernel_size: int, group_size: int,
           scale_factor: int) -> Tensor:
    """The upsampled map ``(n, c, h*s, w*s)``."""
    n, c, h, w = features.shape
    s = scale_factor
    out = features.new_zeros(n, group_size, c // group_size, h, s, w, s)
    for _, _, f, m in _points(features, masks, kernel_size, group_size, scale_factor):
        out.addcmul_(f, m)
    return out.view(n, c, h * s, w * s)


def carafe_grads(grad_out: Tensor, features: Tensor, masks: Tensor, kernel_size: int,
                 group_size: int, scale_factor: int) -> Tuple[Tensor, Tensor]:
    """``(grad_features, grad_masks)`` for ``grad_out`` of the output."""
    n, c, h, w = features.shape
    s, r = scale_factor, (kernel_size - 1) // 2
    go = grad_out.reshape(n, group_size, c // group_size, h, s, w, s)
    grad_padded = features.new_zeros(n, group_size, c // group_size, h + 2 * r, w + 2 * r)
    grad_masks = masks.new_zeros(n, group_size, kernel_size * kernel_size, h, s, w, s)
    for i, j, f, m in _points(features, masks, kernel_size, group_size, scale_factor):
        grad_masks[:, :, i * kernel_size + j] = (go * f).sum(2)
        grad_padded[:, :, :, i:i + h, j:j + w] += (go * m).sum((4, 6))
    grad_features = grad_padded[:, :, :, r:r + h, r:r + w].reshape(n, c, h, w)
    return grad_features, grad_masks.view_as(masks)


def carafe_naive_forward(features: Tensor, masks: Tensor, output: Tensor, kernel_size: int,
                         group_size: int, scale_factor: int) -> None:
    """Fills ``output``."""
    output.copy_(carafe(features, masks, kernel_size, group_size, scale_factor))


def carafe_naive_backward(top_grad: Tensor, features: Tensor, masks: Tensor,
                          bottom_grad: Tensor, mask_grad: Tensor, kernel_size: int,
                          group_size: int, scale_factor: int) -> None:
    """Fills ``bottom_grad`` (features) and ``mask_grad``."""
    g_f, g_m = carafe_grads(top_grad, features, masks, kernel_size, group_size, scale_factor)
    bottom_grad.copy_(g_f)
    mask_grad.copy_(g_m)


def carafe_forward(features: Tensor, masks: Tensor, rfeatures: Tensor, routput: Tensor,
                   rmasks: Tensor, output: Tensor, kernel_size: int, group_size: int,
                   scale_factor: int) -> None:
    """Fills ``output``, and the NHWC copies mmcv's kernel leaves in its buffers.

    ``rfeatures`` matters: mmcv's wrapper saves it for the backward, which
    reads the features from it.
    """
    out = carafe(features, masks, kernel_size, group_size, scale_factor)
    output.copy_(out)
    rfeatures.copy_(features.permute(0, 2, 3, 1).reshape(rfeatures.shape))
    rmasks.copy_(masks.permute(0, 2, 3, 1).reshape(rmasks.shape))
    routput.copy_(out.permute(0, 2, 3, 1).reshape(routput.shape))


def carafe_backward(top_grad: Tensor, rfeatures: Tensor, masks: Tensor, rtop_grad: Tensor,
                    rbottom_grad_hs: Tensor, rbottom_grad: Tensor, rmask_grad: Tensor,
                    bottom_grad: Tensor, mask_grad: Tensor, kernel_size: int,
                    group_size: int, scale_factor: int) -> None:
    """Fills ``bottom_grad`` and ``mask_grad``; the features come from NHWC ``rfeatures``."""
    n, c, h, w = bottom_grad.shape
    features = rfeatures.reshape(n, h, w, c).permute(0, 3, 1, 2)
    g_f, g_m = carafe_grads(top_grad, features, masks, kernel_size, group_size, scale_factor)
    bottom_grad.copy_(g_f)
    mask_grad.copy_(g_m)


ENTRY_POINTS = {
    'carafe_naive_forward': carafe_naive_forward,
    'carafe_naive_backward': carafe_naive_backward,
    'carafe_forward': carafe_forward,
    'carafe_backward': carafe_backward,
}
