"""Pairwise IoU in the arithmetic of mmcv's nms kernels (shared by nms_match and soft_nms).

mmcv computes, in the boxes' own float type,
``w = max(0, min(x2) - max(x1) + offset)``, ``inter = w * h`` and
``inter / (area_i + area_j - inter)`` with ``area = (x2 - x1 + offset) *
(y2 - y1 + offset)``; doing the same operations in the same order gives the
same bits, so a threshold decides exactly as mmcv's does.
"""

import torch
from torch import Tensor


def areas(boxes: Tensor, offset: int = 0) -> Tensor:
    """``(x2 - x1 + offset) * (y2 - y1 + offset)`` for ``boxes`` (N, 4+)."""
    return (boxes[:, 2] - boxes[:, 0] + offset) * (boxes[:, 3] - boxes[:, 1] + offset)


def iou(a: Tensor, area_a: Tensor, b: Tensor, area_b: Tensor, offset: int = 0) -> Tensor:
    """IoU of every box of ``a`` (M, 4+) with every box of ``b`` (N, 4+): (M, N)."""
    w = (torch.minimum(a[:, None, 2], b[None, :, 2]) -
         torch.maximum(a[:, None, 0], b[None, :, 0]) + offset).clamp_(min=0)
    h = (torch.minimum(a[:, None, 3], b[None, :, 3]) -
         torch.maximum(a[:, None, 1], b[None, :, 1]) + offset).clamp_(min=0)
    inter = w * h
    return inter / (area_a[:, None] + area_b[None, :] - inter)


def float32_threshold(threshold: float) -> float:
    """``threshold`` as the C ``float`` mmcv's pybind converts it to."""
    return float(torch.tensor(threshold, dtype=torch.float32))
