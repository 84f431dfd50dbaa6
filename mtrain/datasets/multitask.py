"""Digits split into tasks, each task with only its own labels: the multitask demo's data."""

from typing import Any, Dict, List, Sequence, Tuple, Union

import torch
from torch.utils.data import Dataset, default_collate

from ..evaluation import evaluate_classification
from ..registry import DATASETS
from .digits import DigitsDataset


def collate_task_batches(samples: List[Tuple[Dict[str, Any], ...]]) -> Tuple[Dict[str, Any], ...]:
    """Collate samples that are tuples (one entry per task) into a tuple of task batches.

    PyTorch's default collate turns tuples into lists; a tuple is what tells
    :class:`~mtrain.processors.MultiBatchProcessor` that each element is a batch.
    """
    return tuple(default_collate([sample[t] for sample in samples])
                 for t in range(len(samples[0])))


@DATASETS.register_module()
class MultiTaskDigitsDataset(Dataset):
    """Scikit-learn's digits as several classification tasks with their own labels.

    Each task is a subset of the digits, re-labelled ``0..k-1``: e.g.
    ``tasks=dict(low=[0, 1, 2, 3, 4], high=[5, 6, 7, 8, 9])`` is two 5-class
    tasks, as if two teams had annotated disjoint images for their own
    classes. Every sample carries its ``task_name``, which the model uses to
    pick the head and the batch processor to name the logged losses.

    ``mode='zip'`` (training): item ``i`` is a tuple with one sample of each
    task (task ``t``'s sample ``i mod len(t)``; the length is the largest
    task's, so a smaller task repeats a few samples per epoch), and the loader
    yields a tuple of per-task batches (the dataset's ``collate_fn``, which
    ``build_dataloader`` uses). ``mode='concat'`` (evaluation): every task's
    samples one after the other, one sample per item; :meth:`evaluate`
    reports each task's accuracy and their mean.

    Config::

        tasks = dict(low=[0, 1, 2, 3, 4], high=[5, 6, 7, 8, 9])
        data = dict(train=dict(type='MultiTaskDigitsDataset', tasks=tasks, split='train'),
                    val=dict(type='MultiTaskDigitsDataset', tasks=tasks, split='val',
                             mode='concat'))

    Args:
        tasks: task name → the digits it classifies (at least one task).
        split: ``'train'``, ``'val'``, ``'test'`` or ``'all'`` (see DigitsDataset).
        mode: ``'zip'`` or ``'concat'``.
        val_fraction: share of each class held out for val/test.
    """

    def __init__(self, tasks: Dict[str, Sequence[int]], split: str = 'train', mode: str = 'zip',
                 val_fraction: float = 0.2) -> None:
        if not isinstance(tasks, dict) or not tasks:
            raise ValueError(f'tasks must be a dict such as dict(low=[0, 1], high=[8, 9]), '
                             f'got {tasks!r}')
        if mode not in ('zip', 'concat'):
            raise ValueError(f"mode must be 'zip' (training) or 'concat' (evaluation), "
                             f'got {mode!r}')
        self.task_names = list(tasks)
        self.tasks = {name: DigitsDataset(split, val_fraction, classes=list(classes))
                      for name, classes in tasks.items()}
        self.mode = mode
        sizes = [len(d) for d in self.tasks.values()]
        self._offsets = [sum(sizes[:i]) for i in range(len(sizes))]
        self._length = max(sizes) if mode == 'zip' else sum(sizes)
        self.collate_fn = collate_task_batches if mode == 'zip' else None

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: int) -> Union[Tuple[Dict[str, Any], ...], Dict[str, Any]]:
        if self.mode == 'zip':
            return tuple(dict(d[index % len(d)], task_name=name)
                         for name, d in self.tasks.items())
        for name, dataset, offset in zip(reversed(self.task_names),
                                         reversed(list(self.tasks.values())),
                                         reversed(self._offsets)):
            if index >= offset:
                return dict(dataset[index - offset], task_name=name)
        raise IndexError(index)

    def evaluate(self, results: torch.Tensor, metric: Union[str, Sequence[str]] = 'accuracy',
                 logger: Any = None, **kwargs) -> Dict[str, float]:
        """Each task's metrics as ``<task>.<metric>``, and each metric's mean over tasks.

        ``results``: ``(N, C)`` scores in dataset order (``mode='concat'``),
        a task's scores in its first ``k`` columns.
        """
        if self.mode != 'concat':
            raise ValueError("evaluate needs mode='concat' (one sample per item); set "
                             "mode='concat' in data.val")
        scores = torch.as_tensor(results)
        if len(scores) != len(self):
            raise ValueError(f'got {len(scores)} predictions for {len(self)} samples')
        out: Dict[str, float] = {}
        per_metric: Dict[str, List[float]] = {}
        for name, dataset, offset in zip(self.task_names, self.tasks.values(), self._offsets):
            task_scores = scores[offset:offset + len(dataset), :len(dataset.CLASSES)]
            for key, value in evaluate_classification(task_scores, dataset.labels, metric).items():
                out[f'{name}.{key}'] = value
                per_metric.setdefault(key, []).append(value)
        out.update({key: sum(v) / len(v) for key, v in per_metric.items()})
        return out
