"""roi_align_rotated: mmcv's expected values, roi_align at angle 0, gradcheck, edge cases."""

import math

import pytest
import torch
from torch.autograd import Function, gradcheck

from mtrain.compat.ops import entry_points
from mtrain.compat.ops import roi_align_rotated as rar
from op_functions import RoIAlign

# tests/test_ops/test_roi_align_rotated.py (mmcv 1.7.2): input, rois, output, grad
# (2x2 bins, ratio 2, scale 1, aligned=True, clockwise=False), as facts
GRAD_2X2 = [[[[3.0625, 0.4375], [0.4375, 0.0625]]]]
GRAD_4X4 = [[[[0.47265625, 0.42968750, 0.42968750, 0.04296875],
              [0.42968750, 0.39062500, 0.39062500, 0.03906250],
              [0.42968750, 0.39062500, 0.39062500, 0.03906250],
              [0.04296875, 0.03906250, 0.03906250, 0.00390625]]]]
X4 = [[[[1., 2., 5., 6.], [3., 4., 7., 8.], [9., 10., 13., 14.], [11., 12., 15., 16.]]]]
MMCV_CASES = [
    ([[[[1., 2.], [3., 4.]]]], [[0., 0.5, 0.5, 1., 1., 0]], [[[[1.0, 1.25], [1.5, 1.75]]]],
     GRAD_2X2),
    ([[[[1., 2.], [3., 4.]]]], [[0., 0.5, 0.5, 1., 1., math.pi / 2]],
     [[[[1.5, 1], [1.75, 1.25]]]], GRAD_2X2),
    (X4, [[0., 1.5, 1.5, 3., 3., 0]], [[[[1.9375, 4.75], [7.5625, 10.375]]]], GRAD_4X4),
    (X4, [[0., 1.5, 1.5, 3., 3., math.pi / 2]], [[[[7.5625, 1.9375], [10.375, 4.75]]]],
     GRAD_4X4),
]


class RoIAlignRotated(Function):
    """mmcv's RoIAlignRotatedFunction over the entry points (this venv has no mmcv)."""

    @staticmethod
    def forward(ctx, x, rois, size, scale, ratio, aligned, clockwise):
        ctx.args = (size, size, scale, ratio, aligned, clockwise)
        ctx.shape = x.shape
        ctx.save_for_backward(rois)
        out = x.new_zeros(rois.shape[0], x.shape[1], size, size)
        entry_points()['roi_align_rotated_forward'](x, rois, out, *ctx.args)
        return out

    @staticmethod
    def backward(ctx, grad):
        grad_input = grad.new_zeros(ctx.shape)
        entry_points()['roi_align_rotated_backward'](grad.contiguous(), ctx.saved_tensors[0],
                                                    grad_input, *ctx.args)
        return grad_input, None, None, None, None, None, None


@pytest.mark.parametrize('dtype', [torch.float32, torch.float64, torch.float16])
def test_mmcvs_own_expected_values(dtype):
    for x, rois, out, grad in MMCV_CASES:
        x = torch.tensor(x, dtype=dtype, requires_grad=True)
        y = RoIAlignRotated.apply(x, torch.tensor(rois, dtype=dtype), 2, 1.0, 2, True, False)
        y.backward(torch.ones_like(y))
        assert y.dtype == dtype
        torch.testing.assert_close(y.detach().float(), torch.tensor(out), atol=1e-3, rtol=0)
        torch.testing.assert_close(x.grad.float(), torch.tensor(grad), atol=1e-3, rtol=0)


def _features_and_rois(n=12):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 9, 11, generator=gen, dtype=torch.float64)
    rois = torch.cat([torch.randint(0, 2, (n, 1), generator=gen).double(),
                      torch.rand(n, 2, generator=gen, dtype=torch.float64) * 40,
                      torch.rand(n, 2, generator=gen, dtype=torch.float64) * 30 + 1,
                      (torch.rand(n, 1, generator=gen, dtype=torch.float64) - 0.5) * 6], 1)
    return x, rois


@pytest.mark.parametrize('ratio, aligned, clockwise', [(2, True, True), (0, False, False)])
def test_gradcheck_float64(ratio, aligned, clockwise):
    x, rois = _features_and_rois()
    x.requires_grad_()
    assert gradcheck(lambda t: RoIAlignRotated.apply(t, rois, 3, 0.25, ratio, aligned,
                                                     clockwise), (x, ), atol=1e-6,
                     fast_mode=True)


@pytest.mark.parametrize('ratio', [2, 0])
def test_angle_zero_is_roi_align(ratio):
    """An unrotated RoI (cx, cy, w, h) samples what RoIAlign of its corners does."""
    x, rois = _features_and_rois()
    rois[:, 5] = 0
    corners = torch.cat([rois[:, :1], rois[:, 1:3] - rois[:, 3:5] / 2,
                         rois[:, 1:3] + rois[:, 3:5] / 2], 1)
    ours = RoIAlignRotated.apply(x, rois, 3, 0.25, ratio, True, True)
    torch.testing.assert_close(ours, RoIAlign.apply(x, corners, 3, 0.25, ratio, 1, True))


def test_chunk_order_does_not_change_the_gradient(monkeypatch):
    """Small chunks (RoI order kept) give bitwise the same forward and backward."""
    x, rois = _features_and_rois()
    x.requires_grad_()
    whole = RoIAlignRotated.apply(x, rois, 3, 0.25, 0, True, True)
    whole.backward(torch.ones_like(whole))
    grad, x.grad = x.grad, None
    chunks = rar._chunks
    monkeypatch.setattr(rar, '_chunks', lambda *a, **k: chunks(*a, **k, budget=1))
    part = RoIAlignRotated.apply(x, rois, 3, 0.25, 0, True, True)
    part.backward(torch.ones_like(part))
    assert torch.equal(part, whole) and torch.equal(x.grad, grad)


def test_empty_single_and_identical_rois():
    x, rois = _features_and_rois()
    x.requires_grad_()
    empty = RoIAlignRotated.apply(x, rois[:0], 3, 0.25, 2, True, True)
    assert empty.shape == (0, 3, 3, 3)
    empty.sum().backward()
    assert torch.equal(x.grad, torch.zeros_like(x))
    one = RoIAlignRotated.apply(x, rois[:1], 3, 0.25, 2, True, True)
    twice = RoIAlignRotated.apply(x, rois[[0, 0]], 3, 0.25, 2, True, True)
    assert torch.equal(twice[0], one[0]) and torch.equal(twice[1], one[0])


def test_negative_size_with_aligned_is_one_line_error():
    x, rois = _features_and_rois(1)
    rois[0, 3] = -2.0
    with pytest.raises(ValueError, match='non-negative'):
        RoIAlignRotated.apply(x, rois, 3, 0.25, 2, True, True)
