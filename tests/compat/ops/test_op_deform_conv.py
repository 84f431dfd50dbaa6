"""deform_conv_* and modulated_deform_conv_* entry points, called as mmcv 1.7.2's wrappers do.

The reference is the definition written out: each kernel point samples the
input bilinearly (zero outside) at its regular position plus its (y, x)
offset, which fixes mmcv's offset channel layout independently of torchvision.
"""

import pytest
import torch
import torch.nn.functional as F
from torch.autograd import gradcheck

from mtrain.compat.ops import deform_conv as dc
from mtrain.compat.ops import modulated_deform_conv as mdc

import op_functions_dense  # tests/compat/ops/op_functions_dense.py


def direct_dcn(x, offset, mask, weight, bias, stride, pad, dil, groups, dg):
    """Deformable convolution by definition: grid_sample per kernel point, then a 1x1 conv."""
    n, c, h, w = x.shape
    o, _, kh, kw = weight.shape
    oh, ow = offset.shape[2:]
    ys = torch.arange(oh, dtype=x.dtype) * stride - pad
    xs = torch.arange(ow, dtype=x.dtype) * stride - pad
    cols = []
    for i in range(kh):
        for j in range(kw):
            per_group = []
            for g in range(dg):
                k = g * kh * kw + i * kw + j
                py = ys[:, None] + i * dil + offset[:, 2 * k]
                px = xs[None, :] + j * dil + offset[:, 2 * k + 1]
                grid = torch.stack([px / (w - 1) * 2 - 1, py / (h - 1) * 2 - 1], -1)
                xg = x[:, g * c // dg:(g + 1) * c // dg]
                s = F.grid_sample(xg, grid, align_corners=True, padding_mode='zeros')
                if mask is not None:
                    s = s * mask[:, k:k + 1]
                per_group.append(s)
            cols.append(torch.cat(per_group, 1))
    col = torch.stack(cols, 2)  # n, c, kh*kw, oh, ow
    wv = weight.view(groups, o // groups, c // groups, kh * kw)
    colv = col.view(n, groups, c // groups, kh * kw, oh, ow)
    out = torch.einsum('gock,ngckhw->ngohw', wv, colv).reshape(n, o, oh, ow)
    return out if bias is None else out + bias.view(1, -1, 1, 1)


def _inputs(dtype=torch.float64, n=2, c=4, h=7, w=6, o=6, k=3, stride=2, pad=1, dil=1,
            groups=2, dg=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    oh = (h + 2 * pad - dil * (k - 1) - 1) // stride + 1
    ow = (w + 2 * pad - dil * (k - 1) - 1) // stride + 1
    x = torch.randn(n, c, h, w, generator=g, dtype=dtype)
    offset = 2 * torch.randn(n, 2 * dg * k * k, oh, ow, generator=g, dtype=dtype)
    mask = torch.rand(n, dg * k * k, oh, ow, generator=g, dtype=dtype)
    weight = torch.randn(o, c // groups, k, k, generator=g, dtype=dtype)
    bias = torch.randn(o, generator=g, dtype=dtype)
    return x, offset, mask, weight, bias, dict(stride=stride, pad=pad, dil=dil,
                                                groups=groups, dg=dg)


@pytest.mark.parametrize('stride,pad,dil', [(1, 0, 1), (2, 1, 1), (1, 2, 2)])
def test_offset_layout_matches_the_definition(stride, pad, dil):
    x, offset, mask, weight, bias, cfg = _inputs(stride=stride, pad=pad, dil=dil)
    want = direct_dcn(x, offset, mask, weight, bias, stride, pad, dil, 2, 2)
    got = op_functions_dense.modulated_deform_conv(x, offset, mask, weight, bias, cfg)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    want1 = direct_dcn(x, offset, None, weight, None, stride, pad, dil, 2, 2)
    got1 = op_functions_dense.deform_conv(x, offset, weight, cfg)
    torch.testing.assert_close(got1, want1, rtol=1e-10, atol=1e-10)


def test_gradcheck_deform_conv_float64():
    x, offset, _, weight, _, cfg = _inputs(n=1, c=2, h=5, w=4, o=2, groups=1, dg=1)
    offset = offset * 0.3 + 0.25  # stay off the integer grid where bilinear is not smooth
    args = [t.requires_grad_() for t in (x, offset, weight)]
    assert gradcheck(lambda a, b, c: op_functions_dense.deform_conv(a, b, c, cfg), args)


def test_gradcheck_modulated_deform_conv_float64():
    x, offset, mask, weight, bias, cfg = _inputs(n=1, c=2, h=5, w=4, o=2, groups=1, dg=1)
    offset = offset * 0.3 + 0.25
    args = [t.requires_grad_() for t in (x, offset, mask, weight, bias)]
    assert gradcheck(lambda *a: op_functions_dense.modulated_deform_conv(*a, cfg), args)


def test_backward_parameters_alone_equals_the_stashed_gradient():
    """A frozen input (only the weight needs a gradient) takes the second call's own path."""
    x, offset, _, weight, _, cfg = _inputs(dtype=torch.float32)
    go = torch.randn(2, 6, *dc.forward(x, weight, offset, None, None, (2, 2), (1, 1), (1, 1),
                                      2, 2).shape[2:])
    kw = op_functions_dense.dcn_kwargs(weight, cfg)
    cols, ones = x.new_empty(0), x.new_empty(0)
    dc.deform_conv_backward_input(x, offset, go, torch.zeros_like(x),
                                  torch.zeros_like(offset), weight, cols, **kw)
    stashed = torch.zeros_like(weight)
    dc.deform_conv_backward_parameters(x, offset, go, stashed, cols, ones, scale=1, **kw)
    alone = torch.zeros_like(weight)
    dc.deform_conv_backward_parameters(x, offset, go, alone, cols, ones, scale=0.5, **kw)
    torch.testing.assert_close(alone, stashed * 0.5)
    assert stashed.abs().sum() > 0


def test_half_matches_float():
    x, offset, mask, weight, bias, cfg = _inputs(dtype=torch.float32)
    want = op_functions_dense.modulated_deform_conv(x, offset, mask, weight, bias, cfg)
    halves = [t.half() for t in (x, offset, mask, weight, bias)]
    got = op_functions_dense.modulated_deform_conv(*halves, cfg)
    assert got.dtype == torch.float16
    torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=5e-2)


def test_empty_batch():
    x, offset, mask, weight, bias, cfg = _inputs(dtype=torch.float32)
    x, offset, mask = x[:0], offset[:0], mask[:0]
    x.requires_grad_()
    out = op_functions_dense.modulated_deform_conv(x, offset, mask, weight, bias, cfg)
    assert out.shape[0] == 0 and out.shape[1] == 6
    out.sum().backward()
    assert x.grad.shape == x.shape


def test_kernel_size_mismatch_is_one_line():
    x, offset, _, weight, _, cfg = _inputs(dtype=torch.float32)
    with pytest.raises(ValueError, match=r'deform_conv: kernel size \(5, 5\)'):
        dc.deform_conv_forward(x, weight, offset, x.new_empty(0), x.new_empty(0),
                               x.new_empty(0), kW=5, kH=5, dW=1, dH=1, padW=0, padH=0,
                               dilationW=1, dilationH=1, group=2, deformable_group=2,
                               im2col_step=1)
    assert mdc.ENTRY_POINTS and dc.ENTRY_POINTS


def test_offset_gradient_is_zero_for_samples_on_the_border():
    """A sample at y == -1 or y == H (here: zero offsets, padding 1) gets no offset gradient in
    mmcv (its get_coordinate_weight returns 0 there); torchvision's kernel alone gives one."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 1, 3, 3, generator=g, dtype=torch.float64, requires_grad=True)
    offset = torch.zeros(1, 8, 4, 4, dtype=torch.float64, requires_grad=True)
    weight = torch.ones(1, 1, 2, 2, dtype=torch.float64)
    cfg = dict(stride=1, pad=1, dil=1, groups=1, dg=1)
    op_functions_dense.deform_conv(x, offset, weight, cfg).sum().backward()
    grad = offset.grad.view(4, 2, 4, 4)  # kernel point (i*2 + j), (y, x), out_y, out_x
    on_border = torch.zeros(4, 4, 4, dtype=torch.bool)
    for i in range(2):
        for j in range(2):
            ys = torch.arange(4) - 1 + i
            xs = torch.arange(4) - 1 + j
            on_border[i * 2 + j] = ((ys == -1) | (ys == 3))[:, None] | ((xs == -1) | (xs == 3))
    assert on_border.any() and (~on_border).any()
    assert torch.all(grad.permute(1, 0, 2, 3)[:, on_border] == 0)
    assert torch.count_nonzero(grad.permute(1, 0, 2, 3)[:, ~on_border]) > 10
