"""deform_roi_pool: mmcv's expected values, its CUDA kernel as loops, gradcheck (input, offset)."""

import math

import numpy as np
import pytest
import torch
from torch.autograd import gradcheck

from op_functions import DeformRoIPool, RoIAlign, random_rois
from test_op_roi_align import MMCV_CASES, _bilinear

F = np.float32


def reference(x, rois, offset, size, scale, ratio, gamma):
    """deform_roi_pool_forward_cuda_kernel (mmcv 1.7.2) as loops."""
    x, rois, offset = x.numpy(), rois.numpy(), offset.numpy()
    out = np.zeros((len(rois), x.shape[1], size, size), F)
    for n, roi in enumerate(rois):
        sw, sh, ew, eh = (c * F(scale) - F(0.5) for c in roi[1:])
        rw, rh = ew - sw, eh - sh
        bh, bw = rh / F(size), rw / F(size)
        gh = ratio if ratio > 0 else math.ceil(bh)
        gw = ratio if ratio > 0 else math.ceil(bw)
        for c in range(x.shape[1]):
            for ph in range(size):
                for pw in range(size):
                    w0 = sw + F(gamma) * rw * offset[n, 0, ph, pw]
                    h0 = sh + F(gamma) * rh * offset[n, 1, ph, pw]
                    total = F(0)
                    for iy in range(gh):
                        yy = h0 + F(ph) * bh + F(iy + .5) * bh / F(gh)
                        for ix in range(gw):
                            xx = w0 + F(pw) * bw + F(ix + .5) * bw / F(gw)
                            total += _bilinear(x[int(roi[0]), c], yy, xx)
                    out[n, c, ph, pw] = total / F(max(gh * gw, 1))
    return out


def test_mmcvs_own_expected_values_with_zero_and_no_offset():
    """tests/test_ops/test_deform_roi_pool.py: DeformRoIPoolPack starts with a zero offset."""
    for x, rois, out, grad in MMCV_CASES:
        for offset in (torch.zeros(1, 2, 2, 2), torch.zeros(0)):
            x_ = torch.tensor(x, requires_grad=True)
            y = DeformRoIPool.apply(x_, torch.tensor(rois), offset, 2, 1.0, 2, 0.1)
            y.backward(torch.ones_like(y))
            np.testing.assert_allclose(y.detach().numpy(), out, rtol=1e-3)
            np.testing.assert_allclose(x_.grad.numpy(), grad, rtol=1e-3)


@pytest.mark.parametrize('ratio', [0, 2])
def test_forward_is_mmcvs_kernel(ratio):
    g = torch.Generator().manual_seed(ratio)
    x = torch.randn(2, 2, 10, 12, generator=g)
    rois = random_rois(5, 2, 10, 12, 0.5, g)
    offset = torch.randn(5, 2, 3, 3, generator=g)
    out = DeformRoIPool.apply(x, rois, offset, 3, 0.5, ratio, 0.1)
    np.testing.assert_allclose(out.numpy(), reference(x, rois, offset, 3, 0.5, ratio, 0.1),
                               rtol=1e-5, atol=1e-6)
    zero = DeformRoIPool.apply(x, rois, torch.zeros_like(offset), 3, 0.5, ratio, 0.1)
    assert torch.equal(zero, RoIAlign.apply(x, rois, 3, 0.5, ratio, 1, True))


def test_gradcheck_float64_input_and_offset():
    """Inside the map mmcv's offset-gradient formula is the true derivative."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(1, 2, 12, 12, generator=g, dtype=torch.float64, requires_grad=True)
    rois = torch.tensor([[0., 3., 3., 8., 7.], [0., 2.5, 4., 6., 8.5]], dtype=torch.float64)
    offset = (0.2 * torch.randn(2, 2, 2, 2, generator=g, dtype=torch.float64)).requires_grad_()
    assert gradcheck(lambda a, b: DeformRoIPool.apply(a, rois, b, 2, 1.0, 2, 0.1), (x, offset),
                     eps=1e-6, atol=1e-5)


def test_empty_rois_and_half():
    x = torch.rand(1, 2, 6, 6, requires_grad=True)
    empty = DeformRoIPool.apply(x, torch.zeros(0, 5), torch.zeros(0, 2, 2, 2), 2, 1.0, 2, 0.1)
    assert empty.shape == (0, 2, 2, 2)
    empty.sum().backward()
    assert x.grad.abs().sum() == 0
    rois, offset = torch.tensor([[0., 1., 1., 4., 4.]]), torch.full((1, 2, 2, 2), 0.1)
    full = DeformRoIPool.apply(x.detach(), rois, offset, 2, 1.0, 2, 0.1)
    half = DeformRoIPool.apply(x.detach().half(), rois.half(), offset.half(), 2, 1.0, 2, 0.1)
    torch.testing.assert_close(half.float(), full, rtol=1e-2, atol=1e-2)
