"""carafe_* and carafe_naive_* entry points against CARAFE written per output pixel."""

import pytest
import torch
from torch.autograd import gradcheck

from mtrain.compat.ops import carafe

import op_functions_dense  # tests/compat/ops/op_functions_dense.py


def direct(feat, masks, k, g, s):
    n, c, h, w = feat.shape
    r = (k - 1) // 2
    out = torch.zeros(n, c, h * s, w * s, dtype=feat.dtype)
    for ch in range(c):
        grp = ch // (c // g)
        for y in range(h * s):
            for x in range(w * s):
                for i in range(k):
                    for j in range(k):
                        fy, fx = y // s + i - r, x // s + j - r
                        if 0 <= fy < h and 0 <= fx < w:
                            out[:, ch, y, x] += (masks[:, grp * k * k + i * k + j, y, x]
                                                 * feat[:, ch, fy, fx])
    return out


def _inputs(dtype=torch.float64, n=2, c=4, h=3, w=4, k=3, g=2, s=2, seed=0):
    gen = torch.Generator().manual_seed(seed)
    feat = torch.randn(n, c, h, w, generator=gen, dtype=dtype)
    masks = torch.rand(n, g * k * k, h * s, w * s, generator=gen, dtype=dtype)
    return feat, masks


@pytest.mark.parametrize('naive', [True, False])
def test_forward_matches_the_definition(naive):
    feat, masks = _inputs()
    got = op_functions_dense.carafe_op(feat, masks, 3, 2, 2, naive)
    torch.testing.assert_close(got, direct(feat, masks, 3, 2, 2), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('naive', [True, False])
@pytest.mark.parametrize('k,g,s', [(3, 2, 3), (5, 1, 2), (1, 4, 1)])
def test_gradcheck_float64(naive, k, g, s):
    feat, masks = _inputs(n=1, c=g, h=2, w=2, k=k, g=g, s=s)  # small: gradcheck perturbs each
    args = [t.requires_grad_() for t in (feat, masks)]
    assert gradcheck(lambda f, m: op_functions_dense.carafe_op(f, m, k, g, s, naive), args)


def test_empty_batch_and_half():
    feat, masks = _inputs(dtype=torch.float32)
    out = op_functions_dense.carafe_op(feat[:0], masks[:0], 3, 2, 2)
    assert out.shape == (0, 4, 6, 8)
    want = carafe.carafe(feat, masks, 3, 2, 2)
    got = carafe.carafe(feat.half(), masks.half(), 3, 2, 2)
    torch.testing.assert_close(got.float(), want, rtol=1e-2, atol=1e-2)
