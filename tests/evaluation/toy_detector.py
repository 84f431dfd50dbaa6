"""An mmdet-2.x-style toy detector and dataset, registered as ToyDetector / ToyDetDataset.

The detector follows mmcv 1.x's model contract for evaluation:
``forward(img, img_metas, return_loss=True, **kwargs)`` returns losses in
train mode and, in test mode, one result per image: a list with an
``(k, 5)`` array ``[x1, y1, x2, y2, score]`` per class. Inputs are at twice
the original scale (``img_metas['scale_factor']``); ``simple_test(...,
rescale=True)`` maps boxes back, as mmdet's detectors do. The dataset scores
the results with a real VOC-style mAP at IoU 0.5 against original-scale boxes.
"""

from collections import OrderedDict

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

from mtrain.registry import DATASETS, MODELS

NUM_CLASSES = 3
SCALE = 2.0


@DATASETS.register_module(force=True)
class ToyDetDataset(Dataset):
    """``n`` images (4 features), one object each: its class and an original-scale box."""

    CLASSES = ('a', 'b', 'c')

    def __init__(self, n: int = 51, seed: int = 0, test_mode: bool = False) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 4, generator=g)
        self.labels = (self.x[:, 0] > 0).long() + (self.x[:, 1] > 0.5).long()
        center = self.x[:, 2:4] * 0.5
        self.boxes = torch.cat([center - 1, center + 1], 1)  # 2x2 boxes
        self.test_mode = test_mode

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i):
        item = {'img': self.x[i], 'img_metas': {'scale_factor': torch.tensor(SCALE)}}
        if not self.test_mode:  # as mmdet's test pipelines, no annotations at test time
            item.update(gt_labels=self.labels[i], gt_bboxes=self.boxes[i] * SCALE)
        return item

    def evaluate(self, results, metric='mAP', logger=None, iou_thr=0.5):
        assert metric == 'mAP', metric
        assert len(results) == len(self), (len(results), len(self))
        aps = [average_precision(results, self.labels, self.boxes, c, iou_thr)
               for c in range(NUM_CLASSES)]
        out = OrderedDict(mAP=float(np.mean(aps)))
        out.update((f'AP_{name}', ap) for name, ap in zip(self.CLASSES, aps))
        if logger is not None:
            logger.info(f'mAP@{iou_thr}: {out["mAP"]:.4f}')
        return out


def average_precision(results, labels, boxes, cls, iou_thr=0.5):
    """VOC all-point AP of class ``cls``: ``results`` one per image as :class:`ToyDetector`
    returns them, ``labels``/``boxes`` the images' one object each (original scale)."""
    dets = sorted(((float(d[4]), i, d[:4]) for i, res in enumerate(results)
                   for d in res[cls]), key=lambda det: -det[0])
    positives = int((labels == cls).sum())
    matched, hits = set(), []
    for _, i, box in dets:
        hit = (labels[i] == cls and i not in matched
               and _iou(box, boxes[i].numpy()) >= iou_thr)
        if hit:
            matched.add(i)
        hits.append(hit)
    tp = np.cumsum(hits)
    recall = tp / max(positives, 1)
    precision = tp / np.arange(1, len(hits) + 1)
    # all-point interpolation (VOC 'area')
    prec = np.concatenate([[0.0], precision, [0.0]])
    rec = np.concatenate([[0.0], recall, [1.0]])
    prec = np.maximum.accumulate(prec[::-1])[::-1]
    steps = np.where(rec[1:] != rec[:-1])[0]
    return float(np.sum((rec[steps + 1] - rec[steps]) * prec[steps + 1]))


def _iou(a, b):
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    area = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / area if area > 0 else 0.0


@MODELS.register_module(force=True)
class ToyDetector(nn.Module):
    """A class head and a box head over the 4 features; mmdet 2.x's forward signature."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.cls_head = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, NUM_CLASSES))
        self.bbox_head = nn.Linear(4, 4)

    def forward(self, img, img_metas, return_loss=True, **kwargs):
        if return_loss:
            return self.forward_train(img, img_metas, **kwargs)
        return self.simple_test(img, img_metas, **kwargs)

    def forward_train(self, img, img_metas, gt_labels, gt_bboxes):
        return {'loss_cls': nn.functional.cross_entropy(self.cls_head(img), gt_labels),
                'loss_bbox': nn.functional.smooth_l1_loss(self.bbox_head(img), gt_bboxes)}

    def simple_test(self, img, img_metas, rescale=False):
        scores = self.cls_head(img).softmax(1)
        boxes = self.bbox_head(img)
        if rescale:
            boxes = boxes / img_metas['scale_factor'][:, None]
        dets = torch.cat([boxes[:, None].expand(-1, NUM_CLASSES, -1), scores[..., None]], 2)
        return [[d[c:c + 1].detach().cpu().numpy() for c in range(NUM_CLASSES)] for d in dets]
