"""Benchmarks of mtrain's rotated-box ``mmcv._ext`` ops (mmrotate 0.x's RoI head and NMS).

Run through bench/ops.py: ``PYTHONPATH=. python bench/ops.py --only rotated
[--device cuda] [--quick] [--compiled]``. Each row is the median ms of
mtrain's entry point in mmcv's call shape, and with ``--compiled`` mmcv-full's
CPU kernel on the same inputs:

- ``box_iou_rotated`` of 500 x 2000 boxes (an assigner's IoU matrix; 1M
  pairs), all pairs, iou mode;
- ``nms_rotated`` of 2000 boxes (mmrotate's test-time NMS, IoU 0.1);
- ``roi_align_rotated`` forward + backward of 512 rotated RoIs on a
  stride-16 map (256 channels, 7x7, ``sampling_ratio=2``, aligned,
  clockwise: Oriented R-CNN's ``RotatedSingleRoIExtractor``).
"""

from typing import Dict

import torch

from mtrain.compat.ops import entry_points
from ops import timed  # bench/ops.py: one timing rule for every row

OPS = entry_points()


def rotated_boxes(n: int, device: str, seed: int) -> torch.Tensor:
    """(n, 5) ``(cx, cy, w, h, angle)`` boxes over an 800x1216 image."""
    g = torch.Generator().manual_seed(seed)
    boxes = torch.cat([torch.rand(n, 2, generator=g) * torch.tensor([1216., 800.]),
                       16 + torch.rand(n, 2, generator=g) * 200,
                       (torch.rand(n, 1, generator=g) - 0.5) * torch.pi], 1)
    return boxes.to(device)


def bench_rotated(args, rows: Dict[str, float]) -> None:
    n1, n2 = (200, 1000) if args.quick else (500, 2000)
    a, b = rotated_boxes(n1, args.device, 7), rotated_boxes(n2, args.device, 8)
    scores = torch.rand(n2, generator=torch.Generator().manual_seed(9)).to(args.device)
    ious = a.new_zeros(n1 * n2)
    g = torch.Generator().manual_seed(10)
    feat = torch.randn(1, 256, 50, 76, generator=g).to(args.device)
    rois = torch.cat([torch.zeros(512, 1), rotated_boxes(512, 'cpu', 11)], 1).to(args.device)
    out = feat.new_zeros(512, 256, 7, 7)
    order, none = scores.sort(descending=True)[1], scores.new_empty(0, dtype=torch.int)
    for who, ops in (('mtrain', OPS), ('mmcv-full compiled', args.compiled)):
        if not ops:
            continue

        def align():
            ops['roi_align_rotated_forward'](feat, rois, out, 7, 7, 1 / 16, 2, True, True)
            ops['roi_align_rotated_backward'](out, rois, torch.zeros_like(feat), 7, 7, 1 / 16, 2,
                                              True, True)
        rows[f'box_iou_rotated {n1}x{n2} boxes: {who}'] = timed(
            lambda: ops['box_iou_rotated'](a, b, ious, 0, False), args.repeats, args.device)
        rows[f'nms_rotated {n2} boxes: {who}'] = timed(
            lambda: ops['nms_rotated'](b, scores, order, b[order], none, 0.1, 0), args.repeats,
            args.device)
        rows[f'roi_align_rotated 512 RoIs, stride 16, fwd+bwd: {who}'] = timed(
            align, args.repeats, args.device)


BENCHES = {'rotated': bench_rotated}
