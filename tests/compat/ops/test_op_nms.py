"""nms and nms_match against mmcv's CPU kernel written out as loops, and mmcv's own test values."""

import numpy as np
import pytest
import torch
import torchvision

from mtrain.compat.ops.nms import nms, nms_match

F = np.float32


def _overlap(b, area, i, j, offset):
    w = max(F(0), min(b[i, 2], b[j, 2]) - max(b[i, 0], b[j, 0]) + F(offset))
    h = max(F(0), min(b[i, 3], b[j, 3]) - max(b[i, 1], b[j, 1]) + F(offset))
    inter = w * h
    with np.errstate(invalid='ignore'):
        return inter / (area[i] + area[j] - inter)


def reference_nms(boxes, scores, threshold, offset):
    """mmcv/ops/csrc/pytorch/cpu/nms.cpp, line for line (float32)."""
    order = scores.sort(0, descending=True)[1].tolist()
    b = boxes.numpy()
    area = (b[:, 2] - b[:, 0] + F(offset)) * (b[:, 3] - b[:, 1] + F(offset))
    keep = [True] * len(order)
    for a, i in enumerate(order):
        if keep[a]:
            for c in range(a + 1, len(order)):
                if keep[c] and _overlap(b, area, i, order[c], offset) > F(threshold):
                    keep[c] = False
    return [i for i, k in zip(order, keep) if k]


def reference_nms_match(dets, threshold):
    """nms_match_cpu: suppress at IoU >= threshold; groups headed by the kept box."""
    order = torch.from_numpy(dets[:, 4]).sort(0, descending=True)[1].tolist()
    area = (dets[:, 2] - dets[:, 0]) * (dets[:, 3] - dets[:, 1])
    gone, groups = set(), []
    for a, i in enumerate(order):
        if i in gone:
            continue
        group = [i]
        for j in order[a + 1:]:
            if j not in gone and _overlap(dets, area, i, j, 0) >= F(threshold):
                gone.add(j)
                group.append(j)
        groups.append(group)
    return groups


def _random_case(seed: int, n: int):
    g = torch.Generator().manual_seed(seed)
    integer = seed % 2 == 0  # integer corners make exact IoU ties; some boxes are empty
    xy, wh = torch.rand(n, 2, generator=g) * 50, torch.rand(n, 2, generator=g) * 30
    if integer:
        xy, wh = xy.round(), wh.round()
    scores = torch.rand(n, generator=g)
    if seed % 3 == 0:
        scores = (scores * 4).round() / 4  # many equal scores: the order decides
    return torch.cat([xy, xy + wh], 1), scores


@pytest.mark.parametrize('seed', range(4))
def test_nms_keeps_what_mmcvs_kernel_keeps(seed):
    boxes, scores = _random_case(seed, 100)
    for offset in (0, 1):
        for threshold in (0.3, 0.5, 0.7):
            assert nms(boxes, scores, threshold, offset).tolist() == \
                reference_nms(boxes, scores, threshold, offset)


def test_nms_mmcvs_own_expected_values():
    """tests/test_ops/test_nms.py::test_nms_allclose (mmcv 1.7.2): keeps [1, 0, 3]."""
    boxes = torch.tensor([[6.0, 3.0, 8.0, 7.0], [3.0, 6.0, 9.0, 11.0],
                          [3.0, 7.0, 10.0, 12.0], [1.0, 4.0, 13.0, 7.0]])
    scores = torch.tensor([0.6, 0.9, 0.7, 0.2])
    assert nms(boxes, scores, 0.3, 0).tolist() == [1, 0, 3]


def test_nms_threshold_is_a_c_float():
    """mmcv's pybind makes the threshold a C float: float32(0.3) is above the double 0.3, so
    an IoU of exactly float32(0.3) is not suppressed (torchvision, comparing with the
    double, would suppress it)."""
    boxes = torch.tensor([[0., 0., 10., 10.], [0., 0., 10., 3.]])  # IoU 30 / 100
    scores = torch.tensor([0.9, 0.8])
    assert F(30) / F(100) == F(0.3) and float(F(0.3)) > 0.3
    assert torchvision.ops.nms(boxes, scores, 0.3).tolist() == [0]
    assert nms(boxes, scores, 0.3, 0).tolist() == [0, 1] == reference_nms(boxes, scores, 0.3, 0)


def test_nms_empty_single_and_equal_boxes():
    empty = nms(torch.zeros(0, 4), torch.zeros(0), 0.5)
    assert empty.dtype == torch.long and empty.numel() == 0
    assert nms(torch.tensor([[1., 1., 4., 5.]]), torch.tensor([0.3]), 0.5).tolist() == [0]
    same = torch.tensor([[1., 1., 4., 5.]]).repeat(5, 1)
    kept = nms(same, torch.full((5, ), 0.5), 0.5)
    assert kept.tolist() == [torch.full((5, ), 0.5).sort(0, descending=True)[1][0].item()]


def test_nms_half_boxes_on_cpu_match_float32():
    boxes, scores = _random_case(4, 200)
    assert nms(boxes.half(), scores.half(), 0.5).tolist() == \
        reference_nms(boxes.half().float(), scores.half().float(), 0.5, 0)


@pytest.mark.parametrize('seed', range(4))
def test_nms_match_groups_as_mmcvs_kernel(seed):
    boxes, scores = _random_case(seed, 100)
    dets = torch.cat([boxes, scores[:, None]], 1)
    for threshold in (0.3, 0.6):
        assert nms_match(dets, threshold) == reference_nms_match(dets.numpy(), threshold)


def test_nms_match_mmcvs_own_case():
    """tests/test_ops/test_nms.py::test_nms_match: 2 groups, headed by what nms keeps."""
    dets = torch.tensor([[49.1, 32.4, 51.0, 35.9, 0.9], [49.3, 32.9, 51.0, 35.3, 0.9],
                         [35.3, 11.5, 39.9, 14.5, 0.4], [35.2, 11.7, 39.7, 15.7, 0.3]])
    groups = nms_match(dets, 0.6)
    assert len(groups) == 2
    assert {g[0] for g in groups} == set(nms(dets[:, :4], dets[:, 4], 0.6).tolist())
    assert sorted(i for g in groups for i in g) == [0, 1, 2, 3]
    assert nms_match(torch.zeros(0, 5), 0.6) == []
    assert nms_match(torch.tensor([[0., 0., 2., 2., 0.5]] * 3), 0.5)[0][0] in (0, 1, 2)
    assert len(nms_match(torch.tensor([[0., 0., 2., 2., 0.5]] * 3), 0.5)) == 1
