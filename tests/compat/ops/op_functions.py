"""Autograd wrappers over mtrain's ``mmcv._ext`` entry points, shaped as mmcv 1.7.2's own.

mmcv's ``RoIAlignFunction`` & co. allocate the out-params, call
``ext_module.<op>_forward``, save what the backward needs and call
``ext_module.<op>_backward`` with a zeroed ``grad_input``. These do the same
with the entry points directly, so the kernels can be gradchecked in this
venv (which has no mmcv); the real wrappers run in test_op_route.py.
"""

import torch
from torch.autograd import Function

from mtrain.compat.ops import entry_points

OPS = entry_points()


class RoIAlign(Function):

    @staticmethod
    def forward(ctx, input, rois, size, scale, ratio, mode, aligned):
        ctx.args = (size, size, scale, ratio, mode, aligned)
        ctx.shape = input.shape
        out = input.new_zeros((rois.shape[0], input.shape[1], size, size))
        ay, ax = (out.clone(), out.clone()) if mode == 0 else (input.new_zeros(0), ) * 2
        OPS['roi_align_forward'](input, rois, out, ay, ax, *ctx.args)
        ctx.save_for_backward(rois, ay, ax)
        return out

    @staticmethod
    def backward(ctx, grad):
        rois, ay, ax = ctx.saved_tensors
        grad_input = grad.new_zeros(ctx.shape)
        OPS['roi_align_backward'](grad.contiguous(), rois, ay, ax, grad_input, *ctx.args)
        return grad_input, None, None, None, None, None, None


class RoIPool(Function):

    @staticmethod
    def forward(ctx, input, rois, size, scale):
        ctx.args, ctx.shape = (size, size, scale), input.shape
        out = input.new_zeros((rois.shape[0], input.shape[1], size, size))
        argmax = input.new_zeros(out.shape, dtype=torch.int)
        OPS['roi_pool_forward'](input, rois, out, argmax, *ctx.args)
        ctx.save_for_backward(rois, argmax)
        return out

    @staticmethod
    def backward(ctx, grad):
        rois, argmax = ctx.saved_tensors
        grad_input = grad.new_zeros(ctx.shape)
        OPS['roi_pool_backward'](grad, rois, argmax, grad_input, *ctx.args)
        return grad_input, None, None, None


class DeformRoIPool(Function):

    @staticmethod
    def forward(ctx, input, rois, offset, size, scale, ratio, gamma):
        ctx.args = (size, size, scale, ratio, gamma)
        out = input.new_zeros((rois.shape[0], input.shape[1], size, size))
        OPS['deform_roi_pool_forward'](input, rois, offset, out, *ctx.args)
        ctx.save_for_backward(input, rois, offset)
        return out

    @staticmethod
    def backward(ctx, grad):
        input, rois, offset = ctx.saved_tensors
        grad_input, grad_offset = torch.zeros_like(input), torch.zeros_like(offset)
        OPS['deform_roi_pool_backward'](grad, input, rois, offset, grad_input, grad_offset,
                                        *ctx.args)
        return grad_input, None, grad_offset if offset.numel() else None, None, None, None, None


class SigmoidFocalLoss(Function):
    """Reduction 'mean', as mmcv's default."""

    @staticmethod
    def forward(ctx, input, target, gamma, alpha, weight):
        ctx.args = (gamma, alpha)
        out = input.new_zeros(input.shape)
        OPS['sigmoid_focal_loss_forward'](input, target, weight, out, *ctx.args)
        ctx.save_for_backward(input, target, weight)
        return out.sum() / input.shape[0]

    @staticmethod
    def backward(ctx, grad):
        input, target, weight = ctx.saved_tensors
        grad_input = input.new_zeros(input.shape)
        OPS['sigmoid_focal_loss_backward'](input, target, weight, grad_input, *ctx.args)
        return grad_input * grad / input.shape[0], None, None, None, None


class SoftmaxFocalLoss(Function):
    """Reduction 'mean'; the softmax is taken in Python, as in mmcv's wrapper."""

    @staticmethod
    def forward(ctx, input, target, gamma, alpha, weight):
        ctx.args = (gamma, alpha)
        softmax = torch.softmax(input, 1)
        out = input.new_zeros(input.shape[0])
        OPS['softmax_focal_loss_forward'](softmax, target, weight, out, *ctx.args)
        ctx.save_for_backward(softmax, target, weight)
        return out.sum() / input.shape[0]

    @staticmethod
    def backward(ctx, grad):
        softmax, target, weight = ctx.saved_tensors
        buff, grad_input = softmax.new_zeros(softmax.shape[0]), torch.zeros_like(softmax)
        OPS['softmax_focal_loss_backward'](softmax, target, weight, buff, grad_input, *ctx.args)
        return grad_input * grad / softmax.shape[0], None, None, None, None


def random_rois(k: int, batch: int, height: int, width: int, scale: float,
                generator: torch.Generator, dtype=torch.float32) -> torch.Tensor:
    """``k`` RoIs (batch, x1, y1, x2, y2) in image coordinates of a (height, width) map."""
    size = torch.tensor([width, height]) / scale
    xy = torch.rand(k, 2, generator=generator) * size
    wh = torch.rand(k, 2, generator=generator) * size * 0.7
    index = torch.randint(0, batch, (k, 1), generator=generator).float()
    return torch.cat([index, xy, xy + wh], 1).to(dtype)
