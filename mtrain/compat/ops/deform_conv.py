"""``deform_conv_*`` (DCNv1) of ``mmcv._ext`` on torchvision's ``deform_conv2d`` kernels.

mmcv 1.7.2's ``DeformConv2dFunction`` calls three entry points: the forward
fills ``output`` in place; ``deform_conv_backward_input`` fills ``gradInput``
and ``gradOffset``; ``deform_conv_backward_parameters`` adds ``scale`` times
the weight gradient to ``gradWeight``. The ``columns``/``ones`` buffers and
``im2col_step`` are scratch-space choices of mmcv's kernel and change no
number, so they are accepted and ignored.

torchvision's op computes the same thing: its kernel is a port of mmcv's
(same bilinear rule, zero outside ``(-1, H) x (-1, W)``), the weight layout is
mmcv's, and the offset channels are laid out identically: channel
``2 * (g * kH * kW + i * kW + j)`` is the y (row) offset of kernel point
``(i, j)`` in deformable group ``g``, the next channel its x offset
(tests/compat/ops/test_op_deform_conv.py checks it against a direct
bilinear-sampling formula). mmcv 1.7.2 swaps this op in itself on one
accelerator. Half precision works on CPU and CUDA (mmcv's CPU kernel takes
only float32/float64).

torchvision computes all gradients in one backward call; mmcv asks for them in
two calls, so the first stores the weight gradient on the ``columns`` buffer
(one per forward call, passed to both) keyed on the ``gradOutput`` tensor, and
the second takes it from there instead of running the backward again.
"""

from typing import Optional, Tuple

import torch
from torch import Tensor

import torchvision  # noqa: F401  (registers torch.ops.torchvision)

_STASH = '_mtrain_dcn_grad_weight'


def forward(input: Tensor, weight: Tensor, offset: Tensor, mask: Optional[Tensor],
            bias: Optional[Tensor], stride: Tuple[int, int], pad: Tuple[int, int],
            dilation: Tuple[int, int], group: int, deformable_group: int) -> Tensor:
    """torchvision's forward; ``mask=None`` is DCNv1, ``bias=None`` no bias."""
    use_mask = mask is not None
    if mask is None:
        mask = input.new_zeros((input.size(0), 1))  # what torchvision passes without a mask
    if bias is None:
        bias = input.new_zeros(weight.size(0))
    return torch.ops.torchvision.deform_conv2d(
        input, weight, offset.contiguous(), mask.contiguous(), bias, stride[0], stride[1],
        pad[0], pad[1], dilation[0], dilation[1], group, deformable_group, use_mask)


def backward(grad_output: Tensor, input: Tensor, weight: Tensor, offset: Tensor,
             mask: Optional[Tensor], stride: Tuple[int, int], pad: Tuple[int, int],
             dilation: Tuple[int, int], group: int, deformable_group: int
             ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """``(grad_input, grad_weight, grad_offset, grad_mask, grad_bias)`` from torchvision."""
    use_mask = mask is not None
    if mask is None:
        mask = input.new_zeros((input.size(0), 1))  # what torchvision passes without a mask
    bias = input.new_zeros(weight.size(0))
    grads = torch.ops.torchvision._deform_conv2d_backward(
        grad_output.contiguous(), input, weight, offset.contiguous(), mask.contiguous(),
        bias, stride[0], stride[1], pad[0], pad[1], dilation[0], dilation[1], group,
        deformable_group, use_mask)
    grad_offset = _zero_outside(grads[2], offset, input.shape[2:], weight.shape[2:], stride,
                                pad, dilation, deformable_group)
    return grads[0], grads[1], grad_offset, grads[3], grads[4]


def _zero_outside(grad_offset: Tensor, offset: Tensor, size: Tuple[int, int],
                  kernel: Tuple[int, int], stride: Tuple[int, int], pad: Tuple[int, int],
                  dilation: Tuple[int, int], deformable_group: int) -> Tensor:
    """mmcv's offset gradient is 0 where the sampling point is outside ``(-1, H) x (-1, W)``.

    mmcv's ``get_coordinate_weight`` returns 0 there; torchvision's takes the
    one-sided slope from the corners that are inside (a sample at ``y == -1``
    or ``y == H`` gets a gradient). Each offset element belongs to exactly one
    sampling point, so masking the gradient by that point's position gives
    mmcv's numbers (mmcv's own test_modulated_deform_conv checks this case).
    """
    n, _, oh, ow = offset.shape
    kh, kw = kernel
    idx = dict(device=offset.device, dtype=torch.long)
    off = offset.view(n, deformable_group, kh, kw, 2, oh, ow)
    base_y = (torch.arange(oh, **idx) * stride[0] - pad[0]).view(1, oh, 1) + (
        torch.arange(kh, **idx) * dilation[0]).view(kh, 1, 1)
    base_x = (torch.arange(ow, **idx) * stride[1] - pad[1]).view(1, 1, ow) + (
        torch.arange(kw, **idx) * dilation[1]).view(kw, 1, 1)
    y = base_y.view(1, 1, kh, 1, oh, 1) + off[:, :, :, :, 0]  # int + offset, as mmcv's kernel
    x = base_x.view(1, 1, 1, kw, 1, ow) + off[:, :, :, :, 1]
    inside = (y > -1) & (y < size[0]) & (x > -1) & (x < size[1])
    grad = grad_offset.view(n, deformable_group, kh, kw, 2, oh, ow)
    return torch.where(inside.unsqueeze(4), grad, torch.zeros_like(grad)).view_as(grad_offset)


def deform_conv_forward(input: Tensor, weight: Tensor, offset: Tensor, output: Tensor,
                        columns: Tensor, ones: Tensor, kW: int, kH: int, dW: int, dH: int,
                        padW: int, padH: int, dilationW: int, dilationH: int, group: int,
                        deformable_group: int, im2col_step: int) -> None:
    """Fills ``output`` with the deformable convolution (no bias)."""
    check_kernel('deform_conv', weight, kH, kW)
    out = forward(input, weight, offset, None, None, (dH, dW), (padH, padW),
                  (dilationH, dilationW), group, deformable_group)
    output.copy_(out.view_as(output))


def deform_conv_backward_input(input: Tensor, offset: Tensor, gradOutput: Tensor,
                               gradInput: Tensor, gradOffset: Tensor, weight: Tensor,
                               columns: Tensor, kW: int, kH: int, dW: int, dH: int,
                               padW: int, padH: int, dilationW: int, dilationH: int,
                               group: int, deformable_group: int, im2col_step: int) -> None:
    """Adds the input and offset gradients into ``gradInput`` and ``gradOffset``."""
    check_kernel('deform_conv', weight, kH, kW)
    g_in, g_w, g_off, _, _ = backward(gradOutput, input, weight, offset, None, (dH, dW),
                                      (padH, padW), (dilationH, dilationW), group,
                                      deformable_group)
    gradInput.add_(g_in)
    gradOffset.add_(g_off.view_as(gradOffset))
    # Keyed on the very gradOutput tensor and its version (see the module docstring).
    setattr(columns, _STASH, (gradOutput, gradOutput._version, input, offset, g_w))


def deform_conv_backward_parameters(input: Tensor, offset: Tensor, gradOutput: Tensor,
                                    gradWeight: Tensor, columns: Tensor, ones: Tensor,
                                    kW: int, kH: int, dW: int, dH: int, padW: int,
                                    padH: int, dilationW: int, dilationH: int, group: int,
                                    deformable_group: int, scale: float,
                                    im2col_step: int) -> None:
    """Adds ``scale`` times the weight gradient into ``gradWeight`` (mmcv's ``addmm_`` beta=1)."""
    check_kernel('deform_conv', gradWeight, kH, kW)
    stash = getattr(columns, _STASH, None)
    if stash is not None:
        delattr(columns, _STASH)
    if (stash is not None and stash[0] is gradOutput and stash[1] == gradOutput._version
            and stash[2] is input and stash[3] is offset):
        g_w = stash[4]
    else:  # the weight gradient does not depend on the weight: gradWeight stands in for it
        g_w = backward(gradOutput, input, gradWeight, offset, None, (dH, dW), (padH, padW),
                       (dilationH, dilationW), group, deformable_group)[1]
    gradWeight.add_(g_w, alpha=scale)


def check_kernel(op: str, weight: Tensor, kH: int, kW: int) -> None:
    """A one-line error where mmcv's kernel would ``TORCH_CHECK`` the kernel size."""
    if weight.dim() != 4 or tuple(weight.shape[2:]) != (kH, kW):
        raise ValueError(f'{op}: kernel size ({kH}, {kW}) does not match the weight of '
                         f'shape {tuple(weight.shape)}')


ENTRY_POINTS = {
    'deform_conv_forward': deform_conv_forward,
    'deform_conv_backward_input': deform_conv_backward_input,
    'deform_conv_backward_parameters': deform_conv_backward_parameters,
}
