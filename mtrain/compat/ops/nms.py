"""``nms`` and ``nms_match``: mmcv's greedy NMS on torchvision's compiled kernel.

``nms(boxes, scores, iou_threshold, offset)`` returns the kept indices in
descending score order, as mmcv's kernels do; ``batched_nms``, ``split_thr``,
``score_threshold``/``max_num`` stay mmcv's own Python (``mmcv/ops/nms.py``).
Three details make it decide as mmcv's kernel does:

* the order: mmcv sorts with ``scores.sort(0, descending=True)``; the same
  call here, then torchvision runs on the boxes in that order with strictly
  decreasing rank scores, so ties keep mmcv's order whatever sort torchvision
  uses inside;
* the threshold: mmcv's pybind takes it as a C ``float``; it is rounded to
  float32 before torchvision compares (in double) with it;
* ``offset=1`` (widths ``x2 - x1 + 1``): torchvision has no offset, so
  ``x2``/``y2`` are moved by 1 first; ``(x2 + 1) - x1`` equals mmcv's
  ``x2 - x1 + 1`` exactly for integer coordinates (mmdet 1.x's pixel
  boxes); otherwise a width can differ in its last bit, which changes a
  decision only for an IoU within a rounding of the threshold.

Half-precision boxes on CPU are computed in float32 (mmcv's CPU kernel takes
float32 only; torchvision's CPU kernel no half).
"""

from typing import List

import torch
from torch import Tensor
from torchvision.ops import nms as tv_nms

from .boxes import areas, float32_threshold, iou


def _ranked(boxes: Tensor, scores: Tensor, order: Tensor, threshold: float) -> Tensor:
    """Positions in ``order`` that greedy NMS keeps (ties broken by position)."""
    dtype = boxes.dtype if boxes.dtype in (torch.float32, torch.float64) else torch.float32
    n = order.numel()
    ranks = torch.arange(n, 0, -1, dtype=dtype, device=boxes.device)
    return tv_nms(boxes[order].to(dtype), ranks, threshold)


def nms(boxes: Tensor, scores: Tensor, iou_threshold: float, offset: int = 0) -> Tensor:
    """Indices of the boxes greedy NMS keeps, highest score first (mmcv's ``ext_module.nms``)."""
    if boxes.numel() == 0:
        return boxes.new_empty(0, dtype=torch.long)
    if offset:
        boxes = torch.cat([boxes[:, :2], boxes[:, 2:4] + offset], dim=1)
    order = scores.sort(0, descending=True)[1]
    return order[_ranked(boxes, scores, order, float32_threshold(iou_threshold))]


def nms_match(dets: Tensor, iou_threshold: float) -> List[List[int]]:
    """Groups of ``[kept, suppressed...]`` indices in score order (mmcv's ``ext_module.nms_match``).

    mmcv suppresses at ``IoU >= iou_threshold`` (nms: ``>``); a box joins the
    group of the first kept box, in score order, that it overlaps that much.
    """
    if dets.numel() == 0:
        return []
    if dets.dtype not in (torch.float32, torch.float64):
        dets = dets.float()
    boxes, scores = dets[:, :4], dets[:, 4]
    order = scores.sort(0, descending=True)[1]
    threshold = float32_threshold(iou_threshold)
    # IoU >= t in float32 is IoU > the double just below float32(t)
    kept = _ranked(boxes, scores, order, float(torch.nextafter(
        torch.tensor(threshold, dtype=torch.float64), torch.tensor(-1.0, dtype=torch.float64))))
    kept = kept.sort()[0]  # positions in score order
    owner = _owners(boxes[order], kept, threshold)
    members = torch.argsort(owner * order.numel() + torch.arange(order.numel(),
                                                                 device=owner.device))
    counts = torch.bincount(owner, minlength=kept.numel()).tolist()
    ids = order[members].tolist()
    groups, start = [], 0
    for count in counts:
        groups.append(ids[start:start + count])
        start += count
    return groups


def _owners(ordered: Tensor, kept: Tensor, threshold: float, chunk: int = 4096) -> Tensor:
    """For each box (in score order), the index into ``kept`` of the group it joins."""
    n = ordered.shape[0]
    area = areas(ordered)
    owner = torch.empty(n, dtype=torch.long, device=ordered.device)
    kept_boxes, kept_area = ordered[kept], area[kept]
    for start in range(0, n, chunk):  # bounds memory at len(kept) x chunk
        pos = torch.arange(start, min(start + chunk, n), device=ordered.device)
        hit = iou(kept_boxes, kept_area, ordered[pos], area[pos]) >= threshold
        hit &= kept[:, None] <= pos[None, :]  # only a box kept earlier claims it
        hit |= kept[:, None] == pos[None, :]  # a kept box heads its group (even if IoU is NaN)
        owner[pos] = hit.int().argmax(0)  # the first kept box that overlaps enough
    return owner


ENTRY_POINTS = {'nms': nms, 'nms_match': nms_match}
