"""roi_align: mmcv's expected values, its CPU kernel as loops (max mode), gradcheck, edge cases."""

import math

import numpy as np
import pytest
import torch
from torch.autograd import gradcheck

from mtrain.compat.ops import roi_align as ra
from op_functions import RoIAlign, random_rois

F = np.float32
# tests/test_ops/test_roi_align.py (mmcv 1.7.2): input, rois, output, grad (2x2, ratio 2, aligned)
MMCV_CASES = [
    ([[[[1., 2.], [3., 4.]]]], [[0., 0., 0., 1., 1.]], [[[[1.0, 1.25], [1.5, 1.75]]]],
     [[[[3.0625, 0.4375], [0.4375, 0.0625]]]]),
    ([[[[1., 2., 5., 6.], [3., 4., 7., 8.], [9., 10., 13., 14.], [11., 12., 15., 16.]]]],
     [[0., 0., 0., 3., 3.]], [[[[1.9375, 4.75], [7.5625, 10.375]]]],
     [[[[0.47265625, 0.42968750, 0.42968750, 0.04296875],
        [0.42968750, 0.39062500, 0.39062500, 0.03906250],
        [0.42968750, 0.39062500, 0.39062500, 0.03906250],
        [0.04296875, 0.03906250, 0.03906250, 0.00390625]]]]),
]


def _bilinear(img, y, x):
    h, w = img.shape
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return F(0)
    y, x = max(y, F(0)), max(x, F(0))
    yl, xl = int(y), int(x)
    yh, xh = min(yl + 1, h - 1), min(xl + 1, w - 1)
    if yl >= h - 1:
        yl, y = h - 1, F(h - 1)
    if xl >= w - 1:
        xl, x = w - 1, F(w - 1)
    ly, lx = y - F(yl), x - F(xl)
    hy, hx = F(1) - ly, F(1) - lx
    return hy * hx * img[yl, xl] + hy * lx * img[yl, xh] + ly * hx * img[yh, xl] + \
        ly * lx * img[yh, xh]


def reference_max(x, rois, size, scale, ratio, aligned, init=-10000.0):
    """ROIAlignForward of mmcv's roi_align.cpp, pool_mode 0: (output, argmax_y, argmax_x)."""
    x, rois = x.numpy(), rois.numpy()
    out = np.zeros((len(rois), x.shape[1], size, size), F)
    ay, ax = np.full_like(out, -1), np.full_like(out, -1)
    off = F(0.5 if aligned else 0)
    for n, roi in enumerate(rois):
        sw, sh, ew, eh = (c * F(scale) - off for c in roi[1:])
        rw, rh = ew - sw, eh - sh
        if not aligned:
            rw, rh = max(rw, F(1)), max(rh, F(1))
        bh, bw = rh / F(size), rw / F(size)
        gh = ratio if ratio > 0 else math.ceil(bh)
        gw = ratio if ratio > 0 else math.ceil(bw)
        for c in range(x.shape[1]):
            for ph in range(size):
                for pw in range(size):
                    best, by, bx = F(init), F(-1), F(-1)
                    for iy in range(gh):
                        yy = sh + F(ph) * bh + F(iy + .5) * bh / F(gh)
                        for ix in range(gw):
                            xx = sw + F(pw) * bw + F(ix + .5) * bw / F(gw)
                            v = _bilinear(x[int(roi[0]), c], yy, xx)
                            if v > best:
                                best, by, bx = v, yy, xx
                    out[n, c, ph, pw], ay[n, c, ph, pw], ax[n, c, ph, pw] = best, by, bx
    return out, ay, ax


@pytest.mark.parametrize('dtype', [torch.float32, torch.float64, torch.float16])
def test_mmcvs_own_expected_values(dtype):
    for x, rois, out, grad in MMCV_CASES:
        x = torch.tensor(x, dtype=dtype, requires_grad=True)
        y = RoIAlign.apply(x, torch.tensor(rois, dtype=dtype), 2, 1.0, 2, 1, True)
        y.backward(torch.ones_like(y))
        np.testing.assert_allclose(y.detach().float().numpy(), out, atol=1e-3)
        np.testing.assert_allclose(x.grad.float().numpy(), grad, atol=1e-3)


@pytest.mark.parametrize('aligned', [True, False])
@pytest.mark.parametrize('ratio', [0, 2])
def test_avg_torchvision_is_bitwise_mmcvs_arithmetic(aligned, ratio):
    """torchvision's kernel (avg) equals the vectorised mmcv arithmetic for both ``aligned``:
    both subtract 0.5 only when aligned and raise an unaligned RoI's sides to 1."""
    g = torch.Generator().manual_seed(ratio + aligned)
    x = torch.randn(2, 3, 20, 24, generator=g)
    for scale in (1.0, 0.25):
        rois = random_rois(30, 2, 20, 24, scale, g)
        rois[:3, 3:] = rois[:3, 1:3] + 0.2  # tiny RoIs: the minimum size applies when unaligned
        tv = torch.ops.torchvision.roi_align(x, rois, scale, 7, 7, ratio, aligned)
        assert torch.equal(tv, ra.pool(x, rois, 7, 7, scale, ratio, 1, aligned)[0])
    shifted = ra.pool(x, rois, 7, 7, scale, ratio, 1, True)[0]
    assert not torch.equal(shifted, ra.pool(x, rois, 7, 7, scale, ratio, 1, False)[0])


@pytest.mark.parametrize('aligned', [True, False])
def test_max_mode_is_mmcvs_kernel(aligned):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 2, 9, 11, generator=g)
    rois = random_rois(6, 2, 9, 11, 0.5, g)
    for ratio in (0, 2):
        out = torch.zeros(6, 2, 3, 3)
        ay, ax = torch.zeros_like(out), torch.zeros_like(out)
        ra.roi_align_forward(x, rois, out, ay, ax, 3, 3, 0.5, ratio, 0, aligned)
        ref = reference_max(x, rois, 3, 0.5, ratio, aligned)
        for got, want in zip((out, ay, ax), ref):
            np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize('mode', [0, 1])
@pytest.mark.parametrize('aligned', [True, False])
def test_gradcheck_float64(mode, aligned):
    g = torch.Generator().manual_seed(7)
    x = torch.randn(2, 2, 5, 6, generator=g, dtype=torch.float64, requires_grad=True)
    rois = random_rois(3, 2, 5, 6, 1.0, g, torch.float64)
    assert gradcheck(lambda t: RoIAlign.apply(t, rois, 2, 1.0, 2, mode, aligned), (x, ),
                     eps=1e-6, atol=1e-5)


def test_vectorised_avg_backward_is_torchvisions():
    """bfloat16 (no torchvision CPU kernel) takes the vectorised backward: same gradient."""
    g = torch.Generator().manual_seed(1)
    rois = random_rois(5, 1, 8, 8, 1.0, g)
    grad = torch.rand(5, 2, 3, 3, generator=g)
    tv, mine = torch.zeros(1, 2, 8, 8), torch.zeros(1, 2, 8, 8)
    ra.roi_align_backward(grad, rois, None, None, tv, 3, 3, 1.0, 0, 1, True)
    ra._avg_backward(grad, rois, mine, 1.0, 0, True)
    torch.testing.assert_close(mine, tv, rtol=1e-6, atol=1e-6)
    exact = torch.tensor([[0., 1., 1., 6., 6.], [0., .5, 2., 7.5, 7.], [0., 2.25, 0., 4., 3.5]])
    tv = torch.zeros(1, 2, 8, 8)  # corners bfloat16 holds exactly: only the weights round
    ra.roi_align_backward(grad[:3], exact, None, None, tv, 3, 3, 1.0, 0, 1, True)
    half = torch.zeros(1, 2, 8, 8, dtype=torch.bfloat16)
    ra.roi_align_backward(grad[:3].bfloat16(), exact.bfloat16(), None, None, half, 3, 3, 1.0, 0,
                          1, True)
    torch.testing.assert_close(half.float(), tv, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize('mode', [0, 1])
def test_empty_single_and_equal_rois(mode):
    x = torch.arange(32.).view(1, 2, 4, 4).requires_grad_()
    empty = RoIAlign.apply(x, torch.zeros(0, 5), 2, 1.0, 2, mode, True)
    assert empty.shape == (0, 2, 2, 2)
    empty.sum().backward()
    assert x.grad.abs().sum() == 0
    one = torch.tensor([[0., 0., 0., 3., 3.]])
    single = RoIAlign.apply(x, one, 2, 1.0, 2, mode, True)
    same = RoIAlign.apply(x, one.repeat(3, 1), 2, 1.0, 2, mode, True)
    assert all(torch.equal(s, single[0]) for s in same)
    x.grad = None
    same.sum().backward()
    grad3 = x.grad.clone()
    x.grad = None
    single.sum().backward()
    torch.testing.assert_close(grad3, 3 * x.grad)


def test_max_mode_empty_grid_keeps_mmcvs_initial_value():
    """An aligned RoI of zero size has no samples: mmcv's CPU kernel leaves -10000, argmax -1."""
    x = torch.rand(1, 1, 4, 4)
    out, ay, ax = ra.pool(x, torch.tensor([[0., 1., 1., 1., 1.]]), 2, 2, 1.0, 0, 0, True)
    assert (out == -10000).all() and (ay == -1).all() and (ax == -1).all()


def test_half_on_cpu():
    g = torch.Generator().manual_seed(5)
    x = torch.rand(1, 4, 16, 16, generator=g)
    rois = random_rois(8, 1, 16, 16, 0.5, g)
    for mode in (0, 1):
        full = RoIAlign.apply(x, rois, 3, 0.5, 2, mode, True)
        half = RoIAlign.apply(x.half(), rois.half(), 3, 0.5, 2, mode, True)
        assert half.dtype == torch.float16
        torch.testing.assert_close(half.float(), full, rtol=1e-2, atol=1e-2)
