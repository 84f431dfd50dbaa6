"""softnms against mmcv's CPU kernel written out as a loop, and mmcv's own expected values."""

import math

import numpy as np
import pytest
import torch

from mtrain.compat.ops.soft_nms import softnms

F = np.float32
METHODS = {'naive': 0, 'linear': 1, 'gaussian': 2}


def reference(boxes, scores, threshold, sigma, min_score, method, offset):
    """softnms_cpu (mmcv/ops/csrc/pytorch/cpu/nms.cpp), swap for swap, in float32."""
    b, sc = boxes.numpy().astype(F).copy(), scores.numpy().astype(F).copy()
    area = (b[:, 2] - b[:, 0] + F(offset)) * (b[:, 3] - b[:, 1] + F(offset))
    inds, dets, n, i = list(range(len(sc))), [], len(sc), 0
    while i < n:
        top = max(range(i, n), key=lambda p: (sc[p], -p)) if not np.isnan(sc[i]) else i
        for a in (b, sc, area):
            a[[i, top]] = a[[top, i]]
        inds[i], inds[top] = inds[top], inds[i]
        dets.append([*b[i], sc[i]])
        pos = i + 1
        while pos < n:
            w = max(F(0), min(b[i, 2], b[pos, 2]) - max(b[i, 0], b[pos, 0]) + F(offset))
            h = max(F(0), min(b[i, 3], b[pos, 3]) - max(b[i, 1], b[pos, 1]) + F(offset))
            inter = w * h
            with np.errstate(invalid='ignore'):
                ovr = inter / (area[i] + area[pos] - inter)
            if method == 2:
                weight = F(math.exp(float(-(ovr * ovr) / F(sigma))))
            else:
                weight = F(1) if not ovr >= F(threshold) else (F(0) if method == 0 else F(1) - ovr)
            sc[pos] *= weight
            if sc[pos] < F(min_score):
                for a in (b, sc, area):
                    a[pos] = a[n - 1]
                inds[pos] = inds[n - 1]
                n, pos = n - 1, pos - 1
            pos += 1
        i += 1
    return np.array(dets, dtype=F).reshape(-1, 5)[:n], inds[:n]


def _run(boxes, scores, threshold, sigma, min_score, method, offset=0):
    dets = boxes.new_empty((boxes.shape[0], 5))
    inds = softnms(boxes, scores, dets, iou_threshold=threshold, sigma=sigma,
                   min_score=min_score, method=method, offset=offset)
    return dets[:inds.numel()].numpy(), inds.tolist()


def test_mmcvs_own_expected_values():
    """tests/test_ops/test_nms.py::test_softnms_allclose (mmcv 1.7.2; CUDA-gated there)."""
    boxes = torch.tensor([[6.0, 3.0, 8.0, 7.0], [3.0, 6.0, 9.0, 11.0],
                          [3.0, 7.0, 10.0, 12.0], [1.0, 4.0, 13.0, 7.0]])
    scores = torch.tensor([0.6, 0.9, 0.7, 0.2])
    expected = {
        'linear': ([0.9, 0.6, 0.29024392, 0.2], [1, 0, 2, 3]),
        'gaussian': ([0.9, 0.59630775, 0.35275510, 0.18650459], [1, 0, 2, 3]),
        'naive': ([0.9, 0.6, 0.2], [1, 0, 3]),
    }
    for method, (kept_scores, kept) in expected.items():
        dets, inds = _run(boxes, scores, 0.3, 0.5, 0.01, METHODS[method])
        assert inds == kept
        np.testing.assert_allclose(dets[:, 4], kept_scores, rtol=1e-6)
        np.testing.assert_array_equal(dets[:, :4], boxes[kept].numpy())


@pytest.mark.parametrize('seed', range(6))
def test_bitwise_as_mmcvs_kernel(seed):
    g = torch.Generator().manual_seed(seed)
    n = 80
    xy = (torch.rand(n, 2, generator=g) * 40).round()
    boxes = torch.cat([xy, xy + (torch.rand(n, 2, generator=g) * 30).round()], 1)
    scores = torch.rand(n, generator=g)
    if seed % 2:
        scores = (scores * 5).round() / 5  # ties: the compaction order decides
    for method in (0, 1, 2):
        for offset in (0, 1):
            for min_score in (0.05, 0.3):
                dets, inds = _run(boxes, scores, 0.3, 0.5, min_score, method, offset)
                ref_dets, ref_inds = reference(boxes, scores, 0.3, 0.5, min_score, method, offset)
                assert inds == ref_inds
                np.testing.assert_array_equal(dets, ref_dets)


def test_empty_single_and_equal_boxes():
    dets, inds = _run(torch.zeros(0, 4), torch.zeros(0), 0.3, 0.5, 0.01, 1)
    assert inds == [] and dets.shape == (0, 5)
    dets, inds = _run(torch.tensor([[1., 2., 3., 4.]]), torch.tensor([0.5]), 0.3, 0.5, 0.01, 1)
    assert inds == [0] and dets.tolist() == [[1., 2., 3., 4., 0.5]]
    same = torch.tensor([[1., 2., 5., 6.]]).repeat(4, 1)
    dets, inds = _run(same, torch.full((4, ), 0.5), 0.3, 0.5, 0.01, 0)
    assert inds == [0]  # naive: IoU 1 zeroes the rest
    dets, inds = _run(same, torch.full((4, ), 0.5), 0.3, 0.5, 0.01, 2)
    assert inds == reference(same, torch.full((4, ), 0.5), 0.3, 0.5, 0.01, 2, 0)[1]
    # IoU 1: each pick scales the rest by exp(-1 / 0.5); the third pick's 0.5 e^-4 < 0.01 drops
    np.testing.assert_allclose(dets[:, 4], [0.5, 0.5 * math.exp(-2)], rtol=1e-6)


def test_half_inputs_are_computed_in_float32():
    boxes = torch.tensor([[6.0, 3.0, 8.0, 7.0], [3.0, 6.0, 9.0, 11.0], [3.0, 7.0, 10.0, 12.0]])
    scores = torch.tensor([0.6, 0.9, 0.7])
    dets, inds = _run(boxes.half(), scores.half(), 0.3, 0.5, 0.01, 1)
    ref_dets, ref_inds = reference(boxes, scores.half().float(), 0.3, 0.5, 0.01, 1, 0)
    assert inds == ref_inds
    np.testing.assert_allclose(dets.astype(F), ref_dets, rtol=1e-3)
