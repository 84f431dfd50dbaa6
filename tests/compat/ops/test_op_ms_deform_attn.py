"""ms_deform_attn_forward/backward against multi-scale deformable attention written per point."""

import torch
from torch.autograd import gradcheck

import op_functions_dense  # tests/compat/ops/op_functions_dense.py

SHAPES = torch.tensor([[6, 4], [3, 2]])
STARTS = torch.tensor([0, 24])


def _inputs(dtype=torch.float64, bs=2, queries=3, heads=2, dims=3, points=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    keys = int(SHAPES.prod(1).sum())
    value = torch.randn(bs, keys, heads, dims, generator=g, dtype=dtype)
    # Some locations fall outside [0, 1]: the zero border must match too.
    loc = torch.rand(bs, queries, heads, 2, points, 2, generator=g, dtype=dtype) * 1.2 - 0.1
    weight = torch.rand(bs, queries, heads, 2, points, generator=g, dtype=dtype)
    return value, loc, weight


def bilinear(v, y, x):
    """v: (h, w, dims); pixel-centre sampling at (y, x), zero outside, as mmcv's kernel."""
    h, w, _ = v.shape
    y0, x0 = int(torch.floor(y)), int(torch.floor(x))
    out = torch.zeros(v.shape[-1], dtype=v.dtype)
    for yy in (y0, y0 + 1):
        for xx in (x0, x0 + 1):
            if 0 <= yy < h and 0 <= xx < w:
                out = out + (1 - abs(y - yy)) * (1 - abs(x - xx)) * v[yy, xx]
    return out


def direct(value, loc, weight):
    bs, queries, heads, levels, points, _ = loc.shape
    out = torch.zeros(bs, queries, heads, value.shape[-1], dtype=value.dtype)
    for b in range(bs):
        for q in range(queries):
            for m in range(heads):
                for lvl, ((h, w), s) in enumerate(zip(SHAPES.tolist(), STARTS.tolist())):
                    v = value[b, s:s + h * w, m].view(h, w, -1)
                    for p in range(points):
                        x, y = loc[b, q, m, lvl, p]
                        out[b, q, m] += weight[b, q, m, lvl, p] * bilinear(
                            v, y * h - 0.5, x * w - 0.5)
    return out.flatten(2)


def test_forward_matches_the_definition():
    value, loc, weight = _inputs()
    got = op_functions_dense.ms_deform_attn(value, SHAPES, STARTS, loc, weight)
    torch.testing.assert_close(got, direct(value, loc, weight), rtol=1e-12, atol=1e-12)


def test_gradcheck_float64():
    value, loc, weight = _inputs(bs=1, queries=2)
    args = [t.requires_grad_() for t in (value, loc, weight)]
    assert gradcheck(
        lambda v, l, w: op_functions_dense.ms_deform_attn(v, SHAPES, STARTS, l, w), args)


def test_empty_queries():
    value, loc, weight = _inputs(dtype=torch.float32)
    loc, weight = loc[:, :0].requires_grad_(), weight[:, :0]
    out = op_functions_dense.ms_deform_attn(value, SHAPES, STARTS, loc, weight)
    assert out.shape == (2, 0, 6)
    out.sum().backward()
    assert loc.grad.shape == loc.shape


def test_half_matches_float():
    value, loc, weight = _inputs(dtype=torch.float32)
    want = op_functions_dense.ms_deform_attn(value, SHAPES, STARTS, loc, weight)
    got = op_functions_dense.ms_deform_attn(value.half(), SHAPES, STARTS, loc.half(), weight.half())
    assert got.dtype == torch.float16
    torch.testing.assert_close(got.float(), want, rtol=1e-2, atol=1e-2)
