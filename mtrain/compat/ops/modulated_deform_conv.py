"""``modulated_deform_conv_*`` (DCNv2) of ``mmcv._ext`` on torchvision's ``deform_conv2d``.

mmcv 1.7.2's ``ModulatedDeformConv2dFunction`` calls one forward entry point
(fills ``output``) and one backward (adds into ``grad_input``,
``grad_weight``, ``grad_bias``, ``grad_offset``, ``grad_mask``, all zeros on
entry). torchvision's op with ``mask`` is the same computation (see
:mod:`.deform_conv` for the offset layout); the ``ones``/``columns`` buffers
are mmcv's scratch space and are ignored. ``bias`` is an empty tensor when
``with_bias`` is false, as mmcv's wrapper passes it.
"""

from torch import Tensor

from .deform_conv import backward, check_kernel, forward


def modulated_deform_conv_forward(
        input: Tensor, weight: Tensor, bias: Tensor, ones: Tensor, offset: Tensor,
        mask: Tensor, output: Tensor, columns: Tensor, kernel_h: int, kernel_w: int,
        stride_h: int, stride_w: int, pad_h: int, pad_w: int, dilation_h: int,
        dilation_w: int, group: int, deformable_group: int, with_bias: bool) -> None:
    """Fills ``output`` with the modulated deformable convolution (+ bias if ``with_bias``)."""
    check_kernel('modulated_deform_conv', weight, kernel_h, kernel_w)
    out = forward(input, weight, offset, mask, bias if with_bias else None,
                  (stride_h, stride_w), (pad_h, pad_w), (dilation_h, dilation_w), group,
                  deformable_group)
    output.copy_(out.view_as(output))


def modulated_deform_conv_backward(
        input: Tensor, weight: Tensor, bias: Tensor, ones: Tensor, offset: Tensor,
        mask: Tensor, columns: Tensor, grad_input: Tensor, grad_weight: Tensor,
        grad_bias: Tensor, grad_offset: Tensor, grad_mask: Tensor, grad_output: Tensor,
        kernel_h: int, kernel_w: int, stride_h: int, stride_w: int, pad_h: int, pad_w: int,
        dilation_h: int, dilation_w: int, group: int, deformable_group: int,
        with_bias: bool) -> None:
    """Adds every gradient into its ``grad_*`` tensor (``grad_bias`` only if ``with_bias``)."""
    check_kernel('modulated_deform_conv', weight, kernel_h, kernel_w)
    g_in, g_w, g_off, g_mask, g_b = backward(
        grad_output, input, weight, offset, mask, (stride_h, stride_w), (pad_h, pad_w),
        (dilation_h, dilation_w), group, deformable_group)
    grad_input.add_(g_in)
    grad_weight.add_(g_w)
    grad_offset.add_(g_off.view_as(grad_offset))
    grad_mask.add_(g_mask.view_as(grad_mask))
    if with_bias:
        grad_bias.add_(g_b)


ENTRY_POINTS = {
    'modulated_deform_conv_forward': modulated_deform_conv_forward,
    'modulated_deform_conv_backward': modulated_deform_conv_backward,
}
