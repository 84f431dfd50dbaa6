"""roi_pool: mmcv's expected values, its kernel as loops, where torchvision differs, gradcheck."""

import math

import numpy as np
import pytest
import torch
from torch.autograd import gradcheck

from mtrain.compat.ops.roi_pool import roi_pool_forward
from op_functions import RoIPool, random_rois

F = np.float32
FLT_MAX = np.finfo(F).max
# tests/test_ops/test_roi_pool.py (mmcv 1.7.2, CUDA-gated there): 2x2 bins, scale 1
MMCV_CASES = [
    ([[[[1., 2.], [3., 4.]]]], [[0., 0., 0., 1., 1.]], [[[[1., 2.], [3., 4.]]]],
     [[[[1., 1.], [1., 1.]]]]),
    ([[[[1., 2., 5., 6.], [3., 4., 7., 8.], [9., 10., 13., 14.], [11., 12., 15., 16.]]]],
     [[0., 0., 0., 3., 3.]], [[[[4., 8.], [12., 16.]]]],
     [[[[0., 0., 0., 0.], [0., 1., 0., 1.], [0., 0., 0., 0.], [0., 1., 0., 1.]]]]),
]


def reference(x, rois, size, scale):
    """roi_pool_forward_cuda_kernel (mmcv 1.7.2) as loops: (output, argmax)."""
    x, rois = x.numpy(), rois.numpy()
    h, w = x.shape[2:]
    out = np.zeros((len(rois), x.shape[1], size, size), F)
    arg = np.zeros(out.shape, np.int32)
    for n, roi in enumerate(rois):
        x1, y1 = roi[1] * F(scale), roi[2] * F(scale)
        x2, y2 = (roi[3] + F(1)) * F(scale), (roi[4] + F(1)) * F(scale)
        if x2 - x1 <= 0 or y2 - y1 <= 0:
            continue
        bw, bh = (x2 - x1) / F(size), (y2 - y1) / F(size)
        for c in range(x.shape[1]):
            for ph in range(size):
                for pw in range(size):
                    ya = min(max(math.floor(F(ph) * bh + y1), 0), h)
                    yb = min(max(math.ceil(F(ph + 1) * bh + y1), 0), h)
                    xa = min(max(math.floor(F(pw) * bw + x1), 0), w)
                    xb = min(max(math.ceil(F(pw + 1) * bw + x1), 0), w)
                    best = F(0) if (yb <= ya or xb <= xa) else -FLT_MAX
                    idx = -1
                    for yy in range(ya, yb):
                        for xx in range(xa, xb):
                            if x[int(roi[0]), c, yy, xx] > best:
                                best, idx = x[int(roi[0]), c, yy, xx], yy * w + xx
                    out[n, c, ph, pw], arg[n, c, ph, pw] = best, idx
    return out, arg


def _forward(x, rois, size, scale):
    out = x.new_zeros((rois.shape[0], x.shape[1], size, size))
    arg = torch.zeros(out.shape, dtype=torch.int)
    roi_pool_forward(x, rois, out, arg, size, size, scale)
    return out, arg


@pytest.mark.parametrize('dtype', [torch.float32, torch.float64, torch.float16])
def test_mmcvs_own_expected_values(dtype):
    for x, rois, out, grad in MMCV_CASES:
        x = torch.tensor(x, dtype=dtype, requires_grad=True)
        y = RoIPool.apply(x, torch.tensor(rois, dtype=dtype), 2, 1.0)
        y.backward(torch.ones_like(y))
        np.testing.assert_allclose(y.detach().float().numpy(), out, rtol=1e-3)
        np.testing.assert_allclose(x.grad.float().numpy(), grad, rtol=1e-3)


@pytest.mark.parametrize('scale', [1.0, 0.5, 0.3])
def test_is_mmcvs_kernel_not_torchvisions(scale):
    g = torch.Generator().manual_seed(int(scale * 10))
    x = torch.randn(2, 3, 10, 12, generator=g)
    rois = random_rois(12, 2, 10, 12, scale, g)
    rois[0, 3:] = rois[0, 1:3] - 2  # negative size: skipped, out-params left as they were
    out, arg = _forward(x, rois, 3, scale)
    want, want_arg = reference(x, rois, 3, scale)
    np.testing.assert_array_equal(out.numpy(), want)
    np.testing.assert_array_equal(arg.numpy(), want_arg)
    tv = torch.ops.torchvision.roi_pool(x, rois, scale, 3, 3)[0]
    assert not torch.equal(tv[1:], out[1:])  # torchvision rounds the corners first


def test_gradcheck_float64():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(1, 2, 7, 7, generator=g, dtype=torch.float64, requires_grad=True)
    rois = random_rois(4, 1, 7, 7, 1.0, g, torch.float64)
    assert gradcheck(lambda t: RoIPool.apply(t, rois, 2, 1.0), (x, ), eps=1e-6, atol=1e-5)


def test_empty_single_and_equal_rois():
    x = torch.arange(32.).view(1, 2, 4, 4).requires_grad_()
    assert RoIPool.apply(x, torch.zeros(0, 5), 2, 1.0).shape == (0, 2, 2, 2)
    one = torch.tensor([[0., 0., 0., 3., 3.]])
    single = RoIPool.apply(x, one, 2, 1.0)
    same = RoIPool.apply(x, one.repeat(3, 1), 2, 1.0)
    assert all(torch.equal(s, single[0]) for s in same)
    same.sum().backward()
    assert x.grad.sum() == 3 * 8  # each of 3 x 2 x 2 x 2 bins sends 1 to its maximum
    equal = torch.ones(1, 1, 4, 4)  # all values equal: the first in row-major order wins
    assert _forward(equal, one, 2, 1.0)[1].flatten().tolist() == [0, 2, 8, 10]


def test_half_on_cpu():
    x = torch.randn(1, 3, 8, 8)
    rois = torch.tensor([[0., 1., 1., 6., 5.], [0., 0., 2., 7., 7.]])
    assert torch.equal(_forward(x.half(), rois.half(), 3, 1.0)[0], _forward(x, rois, 3, 1.0)[0]
                       .half())
