"""Small classifiers that follow the model contract (loss dict in train, scores in eval)."""

from typing import Dict, Optional, Union

import torch
import torch.nn.functional as F
from torch import nn

from ..registry import MODELS


class ClassifierBase(nn.Module):
    """``forward(img, gt_label=None)``: the loss dict in train mode, softmax scores in eval.

    Subclasses build ``self.features`` (image → flat features) and ``self.head``.
    """

    features: nn.Module
    head: nn.Module

    def forward(self, img: torch.Tensor, gt_label: Optional[torch.Tensor] = None,
                **kwargs) -> Union[Dict[str, torch.Tensor], torch.Tensor]:
        logits = self.head(self.features(img))
        if self.training:
            if gt_label is None:
                raise ValueError(f'{type(self).__name__} needs gt_label in train mode')
            return {'loss': F.cross_entropy(logits, gt_label)}
        return logits.softmax(dim=1)


@MODELS.register_module()
class LeNet(ClassifierBase):
    """A small CNN for 8×8 (or larger) grey images: three 3×3 conv blocks and two FC layers.

    Config::

        model = dict(type='LeNet', num_classes=10)
    """

    def __init__(self, num_classes: int = 10, in_channels: int = 1, width: int = 32) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, padding=1, bias=False), nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.Conv2d(width, 2 * width, 3, padding=1, bias=False), nn.BatchNorm2d(2 * width),
            nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(2 * width, 2 * width, 3, padding=1), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(2), nn.Flatten())
        self.head = nn.Sequential(nn.Linear(8 * width, 128), nn.ReLU(inplace=True),
                                  nn.Dropout(0.2), nn.Linear(128, num_classes))


@MODELS.register_module()
class MLPClassifier(ClassifierBase):
    """``in_dim → hidden → num_classes`` with a ReLU (the overhead benchmark's model).

    Config::

        model = dict(type='MLPClassifier', in_dim=64, hidden=64, num_classes=10)
    """

    def __init__(self, in_dim: int = 64, hidden: int = 64, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Flatten()
        self.head = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(inplace=True),
                                  nn.Linear(hidden, num_classes))
