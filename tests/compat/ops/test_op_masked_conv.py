"""masked_im2col/col2im_forward: mmcv's MaskedConv2d sequence equals a masked conv2d."""

import pytest
import torch
import torch.nn.functional as F

from mtrain.compat.ops import masked_conv


def masked_conv2d(x, mask, weight, bias, pad):
    """mmcv 1.7.2's MaskedConv2dFunction.forward sequence on the entry points."""
    o, c, kh, kw = weight.shape
    oh, ow = x.shape[2] + 2 * pad - kh + 1, x.shape[3] + 2 * pad - kw + 1
    idx = torch.nonzero(mask[0] > 0)
    out = x.new_zeros(1, o, oh, ow)
    col = x.new_zeros(c * kh * kw, idx.size(0))
    masked_conv.masked_im2col_forward(x, idx[:, 0].contiguous(), idx[:, 1].contiguous(), col,
                                      kernel_h=kh, kernel_w=kw, pad_h=pad, pad_w=pad)
    res = torch.addmm(bias[:, None], weight.view(o, -1), col)
    masked_conv.masked_col2im_forward(res, idx[:, 0].contiguous(), idx[:, 1].contiguous(), out,
                                      height=oh, width=ow, channels=o)
    return out


@pytest.mark.parametrize('k,pad', [(3, 1), (3, 0), (1, 0), (5, 2)])
def test_equals_conv2d_at_the_masked_pixels(k, pad):
    g = torch.Generator().manual_seed(k + pad)
    x = torch.randn(1, 3, 6, 7, generator=g, dtype=torch.float64)
    weight = torch.randn(4, 3, k, k, generator=g, dtype=torch.float64)
    bias = torch.randn(4, generator=g, dtype=torch.float64)
    oh, ow = 6 + 2 * pad - k + 1, 7 + 2 * pad - k + 1
    mask = (torch.rand(1, oh, ow, generator=g) > 0.5).double()
    want = F.conv2d(x, weight, bias, padding=pad) * mask[:, None]
    torch.testing.assert_close(masked_conv2d(x, mask, weight, bias, pad), want)


def test_im2col_layout_and_border():
    x = torch.arange(2 * 3 * 3, dtype=torch.float32).view(1, 2, 3, 3)
    col = x.new_zeros(2 * 9, 1)
    masked_conv.masked_im2col_forward(x, torch.tensor([0]), torch.tensor([2]), col, 3, 3, 1, 1)
    # Row c*9 + i*3 + j is channel c at (0 - 1 + i, 2 - 1 + j); outside the image it is 0.
    want = [0, 0, 0, 1, 2, 0, 4, 5, 0, 0, 0, 0, 10, 11, 0, 13, 14, 0]
    assert col.view(-1).tolist() == want


def test_half():
    x = torch.randn(1, 2, 5, 5)
    col16 = torch.zeros(2 * 9, 2, dtype=torch.float16)
    col32 = torch.zeros(2 * 9, 2)
    h, w = torch.tensor([0, 4]), torch.tensor([1, 3])
    masked_conv.masked_im2col_forward(x.half(), h, w, col16, 3, 3, 1, 1)
    masked_conv.masked_im2col_forward(x, h, w, col32, 3, 3, 1, 1)
    assert torch.equal(col16, col32.half())
