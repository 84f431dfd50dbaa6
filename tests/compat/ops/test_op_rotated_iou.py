"""box_iou_rotated / nms_rotated: mmcv's expected values, geometric definitions, edge cases."""

import math

import pytest
import torch

from mtrain.compat.ops import rotated_iou as ri

# tests/test_ops/test_box_iou_rotated.py and test_nms_rotated.py (mmcv 1.7.2), as facts
B1 = [[1.0, 1.0, 3.0, 4.0, 0.5], [2.0, 2.0, 3.0, 4.0, 0.6], [7.0, 7.0, 8.0, 8.0, 0.4]]
B2 = [[0.0, 2.0, 2.0, 5.0, 0.3], [2.0, 1.0, 3.0, 3.0, 0.5], [5.0, 5.0, 6.0, 7.0, 0.4]]
IOU = [[0.3708, 0.4351, 0.0000], [0.1104, 0.4487, 0.0424], [0.0000, 0.0000, 0.3622]]
IOF = [[0.4959, 0.5306, 0.0000], [0.1823, 0.5420, 0.1832], [0.0000, 0.0000, 0.4404]]
NMS_BOXES = [[6.0, 3.0, 8.0, 7.0, 0.5, 0.7], [3.0, 6.0, 9.0, 11.0, 0.6, 0.8],
             [3.0, 7.0, 10.0, 12.0, 0.3, 0.5], [1.0, 4.0, 13.0, 7.0, 0.6, 0.9]]


def ious(b1, b2, mode=0, aligned=False):
    b1, b2 = torch.as_tensor(b1, dtype=torch.float32), torch.as_tensor(b2, dtype=torch.float32)
    out = b1.new_zeros(len(b1) if aligned else len(b1) * len(b2))
    ri.box_iou_rotated(b1, b2, out, mode, aligned)
    return out if aligned else out.view(len(b1), len(b2))


def nms(boxes, scores, thr, labels=None):
    boxes, scores = torch.as_tensor(boxes), torch.as_tensor(scores)
    dets = boxes if labels is None else torch.cat([boxes, labels[:, None].float()], 1)
    return ri.nms_rotated(dets, scores, None, None, None, thr, labels is not None)


@pytest.mark.parametrize('mode, expected', [(0, IOU), (1, IOF)])
def test_mmcvs_own_expected_values(mode, expected):
    torch.testing.assert_close(ious(B1, B2, mode), torch.tensor(expected), atol=1e-4, rtol=0)
    diag = torch.tensor(expected).diagonal()
    torch.testing.assert_close(ious(B1, B2, mode, True), diag, atol=1e-4, rtol=0)


def test_mmcvs_nms_rotated_expected_keep():
    boxes = torch.tensor(NMS_BOXES)
    assert nms(boxes[:, :5], boxes[:, 5], 0.5).tolist() == [3, 1, 0]


def test_axis_aligned_and_quarter_turn_match_the_box_formula():
    # 4x2 box at the origin against 2x2 boxes sliding along x: overlap 2 * (3 - |dx|) clipped
    a = [[0.0, 0.0, 4.0, 2.0, 0.0]]
    for dx in (0.0, 0.5, 1.5, 2.5, 3.5):
        inter = 2 * max(0.0, min(2.0, 3.0 - dx))
        got = ious(a, [[dx, 0.0, 2.0, 2.0, 0.0]])
        assert got.item() == pytest.approx(inter / (8 + 4 - inter), abs=1e-6)
        # the same boxes turned a quarter (w and h swapped): the same overlap
        turned = ious([[0.0, 0.0, 2.0, 4.0, math.pi / 2]], [[dx, 0.0, 2.0, 2.0, math.pi / 2]])
        assert turned.item() == pytest.approx(inter / (8 + 4 - inter), abs=1e-6)


def test_iof_of_a_box_inside_another_is_one_and_iou_the_area_ratio():
    small, big = [[3.0, 4.0, 2.0, 1.0, 0.7]], [[3.0, 4.0, 6.0, 5.0, 0.7]]
    assert ious(small, big, mode=1).item() == pytest.approx(1.0, abs=1e-6)
    assert ious(small, big).item() == pytest.approx(2 / 30, abs=1e-6)
    assert ious(big, small, mode=1).item() == pytest.approx(2 / 30, abs=1e-6)


def test_identical_boxes_single_box_and_empty():
    boxes = torch.tensor([[5.0, 5.0, 3.0, 2.0, 0.3], [1.0, 1.0, 2.0, 2.0, -1.2]])
    torch.testing.assert_close(ious(boxes, boxes, aligned=True), torch.ones(2))
    assert ious(boxes[:1], boxes[:1]).shape == (1, 1)
    assert ious(boxes[:0], boxes).shape == (0, 2)
    assert ious(boxes[:0], boxes[:0], aligned=True).shape == (0, )
    assert nms(boxes[:0], torch.zeros(0), 0.5).shape == (0, )
    assert nms(boxes[:1], torch.ones(1), 0.5).tolist() == [0]
    # a box repeated: only the highest-scored copy survives
    assert nms(boxes[[0, 0, 0]], torch.tensor([0.2, 0.9, 0.5]), 0.5).tolist() == [1]


def test_degenerate_box_has_zero_iou():
    assert ious([[0.0, 0.0, 0.0, 2.0, 0.0]], [[0.0, 0.0, 2.0, 2.0, 0.0]]).item() == 0.0


def test_nms_rotated_labels_follow_the_device_kernel():
    """mmcv's CPU kernel suppresses across labels; only its CUDA kernel keeps them apart."""
    boxes = torch.tensor([[0.0, 0.0, 4.0, 4.0, 0.1], [0.1, 0.0, 4.0, 4.0, 0.1]])
    labels = torch.tensor([0, 1])
    assert nms(boxes, torch.tensor([0.9, 0.8]), 0.5, labels).tolist() == [0]
    if torch.cuda.is_available():
        kept = nms(boxes.cuda(), torch.tensor([0.9, 0.8]).cuda(), 0.5, labels.cuda())
        assert kept.tolist() == [0, 1]


@pytest.mark.parametrize('dtype', [torch.float64, torch.float16])
def test_other_dtypes(dtype):
    b1, b2 = torch.tensor(B1, dtype=dtype), torch.tensor(B2, dtype=dtype)
    out = b1.new_zeros(9)
    ri.box_iou_rotated(b1, b2, out, 0, False)
    torch.testing.assert_close(out.view(3, 3).float(), torch.tensor(IOU), atol=1e-3, rtol=0)


def test_chunks_give_the_same_result(monkeypatch):
    gen = torch.Generator().manual_seed(0)
    boxes = torch.cat([torch.rand(40, 2, generator=gen) * 10, torch.rand(40, 2, generator=gen)
                       * 5 + 1, torch.rand(40, 1, generator=gen) * 3], 1)
    whole = ious(boxes, boxes)
    monkeypatch.setattr(ri, 'CHUNK', 7)
    assert torch.equal(ious(boxes, boxes), whole)


def test_barely_touching_tips_are_computed_and_far_pairs_are_zero():
    """Two 2x2 squares turned 45 degrees whose tips overlap by 0.2: a diamond of area 0.02."""
    d = 2 * math.sqrt(2) - 0.2
    got = ious([[0.0, 0.0, 2.0, 2.0, math.pi / 4]], [[d, 0.0, 2.0, 2.0, math.pi / 4]])
    assert got.item() == pytest.approx(0.02 / (8 - 0.02), rel=1e-4)
    assert ious([[0.0, 0.0, 2.0, 2.0, 0.3]], [[2.9, 0.0, 2.0, 2.0, 0.3]]).item() == 0.0
