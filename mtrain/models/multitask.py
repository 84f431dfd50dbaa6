"""A shared backbone with one classification head per task (the multitask demo's model)."""

from typing import Dict, List, Optional, Sequence, Union

import torch
import torch.nn.functional as F
from torch import nn

from ..registry import MODELS


@MODELS.register_module()
class MultiTaskClassifier(nn.Module):
    """A small CNN backbone shared by all tasks, and a two-layer head per task.

    ``forward(img, gt_label=None, task_name=None)``: ``task_name`` is a
    string or one string per sample (what a loader collates), and picks the
    head of each sample. In train mode it returns ``{'loss_cls': ...}``,
    the cross-entropy over the batch, each sample scored by its own task's
    head; a batch of one task (what ``MultiTaskDigitsDataset`` in zip mode
    gives) only uses that task's head, so the other heads get no gradient
    from it. In eval mode it returns ``(N, C)`` softmax scores, a task's
    ``k`` classes in the first ``k`` columns (zeros after).

    Config::

        model = dict(type='MultiTaskClassifier', tasks=dict(low=5, high=5), width=16)

    Args:
        tasks: task name → number of classes.
        in_channels: image channels.
        width: channels of the first conv layer (the second has twice as many).
    """

    def __init__(self, tasks: Dict[str, int], in_channels: int = 1, width: int = 16) -> None:
        super().__init__()
        if not isinstance(tasks, dict) or not tasks:
            raise ValueError(f'tasks must be a dict of task name -> number of classes, '
                             f'got {tasks!r}')
        self.num_classes = dict(tasks)
        self.backbone = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, padding=1, bias=False), nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.Conv2d(width, 2 * width, 3, padding=1, bias=False), nn.BatchNorm2d(2 * width),
            nn.ReLU(inplace=True), nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(2), nn.Flatten())
        self.heads = nn.ModuleDict({
            name: nn.Sequential(nn.Linear(8 * width, 64), nn.ReLU(inplace=True),
                                nn.Linear(64, classes))
            for name, classes in tasks.items()})

    def forward(self, img: torch.Tensor, gt_label: Optional[torch.Tensor] = None,
                task_name: Union[str, Sequence[str], None] = None
                ) -> Union[Dict[str, torch.Tensor], torch.Tensor]:
        groups = self._groups(task_name, len(img), img.device)
        features = self.backbone(img)
        if self.training:
            if gt_label is None:
                raise ValueError('MultiTaskClassifier needs gt_label in train mode')
            total = sum(F.cross_entropy(self.heads[name](features[idx]), gt_label[idx],
                                        reduction='sum') for name, idx in groups)
            return {'loss_cls': total / len(img)}
        width = max(self.num_classes.values())
        scores = features.new_zeros(len(img), width)
        for name, idx in groups:
            probs = self.heads[name](features[idx]).softmax(dim=1)
            scores[idx, :probs.shape[1]] = probs.to(scores.dtype)
        return scores

    def _groups(self, task_name: Union[str, Sequence[str], None], n: int,
                device: torch.device) -> List:
        """``[(task, index)]`` with ``index`` a slice (one task) or a tensor of positions."""
        if task_name is None:
            raise ValueError('MultiTaskClassifier needs task_name (the head to use) in every '
                             f'batch; tasks: {sorted(self.num_classes)}')
        names = [task_name] * n if isinstance(task_name, str) else list(task_name)
        unknown = sorted(set(names) - set(self.heads))
        if unknown:
            raise ValueError(f'unknown task(s) {unknown}; this model has heads for '
                             f'{sorted(self.heads)}')
        if all(name == names[0] for name in names):
            return [(names[0], slice(None))]
        return [(name, torch.tensor([i for i, x in enumerate(names) if x == name], device=device))
                for name in dict.fromkeys(names)]
