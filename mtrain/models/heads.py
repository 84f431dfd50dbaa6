"""Classification heads: backbone features in, class logits out."""

from typing import Optional

import torch
from torch import nn

from ..registry import MODELS


@MODELS.register_module()
class LinearClsHead(nn.Module):
    """Global average pooling (for 4-D feature maps), dropout, one linear layer.

    Config::

        head = dict(type='LinearClsHead', num_classes=10)  # in_channels: from the backbone

    Args:
        num_classes: number of classes (output width).
        in_channels: feature width; :class:`ImageClassifier` fills it in from a
            torchvision backbone's replaced classifier layer.
        dropout: dropout probability before the linear layer.
    """

    def __init__(self, num_classes: int, in_channels: Optional[int] = None,
                 dropout: float = 0.0) -> None:
        super().__init__()
        if not isinstance(num_classes, int) or num_classes < 1:
            raise ValueError(f'num_classes must be a positive integer, got {num_classes!r}')
        if in_channels is None:
            raise ValueError('in_channels is not known for this backbone: set '
                             'head.in_channels to the width of its output features')
        self.num_classes = num_classes
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.fc = nn.Linear(in_channels, num_classes)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        if features.dim() == 4:  # (N, C, H, W) feature maps
            features = features.mean(dim=(2, 3))
        elif features.dim() != 2:
            features = features.flatten(1)
        return self.fc(self.dropout(features))
