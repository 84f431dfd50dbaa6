"""scikit-learn's bundled 8×8 handwritten digits: real data, no download."""

import importlib.util
import os.path as osp
from typing import Any, Dict, Sequence, Union

import numpy as np
import torch

from ..evaluation import CLASSIFICATION_METRICS, evaluate_classification
from ..registry import DATASETS


@DATASETS.register_module()
class DigitsDataset(torch.utils.data.Dataset):
    """The 1,797 8×8 grey images of scikit-learn's ``load_digits``, 10 classes.

    A fixed stratified split: within each class, every ``round(1/val_fraction)``-th
    image (in the file's order) is a val image, so the split never changes
    between runs or machines. Pixel values 0..16 are scaled to 0..1.

    Config::

        data = dict(train=dict(type='DigitsDataset', split='train'),
                    val=dict(type='DigitsDataset', split='val'))

    Args:
        split: ``'train'``, ``'val'`` (``'test'`` is the val split) or ``'all'``.
        val_fraction: share of each class held out (default 0.2).
        classes: keep only these digits (labels are re-numbered 0..k-1);
            used by the multitask demo.
    """

    CLASSES = tuple(str(d) for d in range(10))
    METRICS = CLASSIFICATION_METRICS  # checked against `evaluation` before training

    def __init__(self, split: str = 'train', val_fraction: float = 0.2,
                 classes: Union[Sequence[int], None] = None) -> None:
        if split not in ('train', 'val', 'test', 'all'):
            raise ValueError(f"split must be 'train', 'val', 'test' or 'all', got {split!r}")
        if not 0 < val_fraction < 1:
            raise ValueError(f'val_fraction must be between 0 and 1, got {val_fraction}')
        images, labels = _load_digits()
        keep = _split_mask(labels, split, val_fraction)
        if classes is not None:
            keep &= np.isin(labels, classes)
            remap = {c: i for i, c in enumerate(classes)}
            labels = np.array([remap.get(int(l), -1) for l in labels])
            self.CLASSES = tuple(str(c) for c in classes)
        self.images = torch.from_numpy(images[keep]).float().div_(16.0).reshape(-1, 1, 8, 8)
        self.labels = torch.from_numpy(labels[keep]).long()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> Dict[str, torch.Tensor]:
        return {'img': self.images[index], 'gt_label': self.labels[index]}

    def get_gt_labels(self) -> torch.Tensor:
        return self.labels

    def evaluate(self, results: torch.Tensor, metric: Union[str, Sequence[str]] = 'accuracy',
                 logger: Any = None) -> Dict[str, float]:
        """Score ``results`` (``(N, 10)`` class scores in dataset order)."""
        scores = torch.as_tensor(results)
        if len(scores) != len(self):
            raise ValueError(f'got {len(scores)} predictions for {len(self)} samples')
        return evaluate_classification(scores, self.labels, metric)


def _load_digits():
    """The images and labels of ``sklearn.datasets.load_digits``, read from its data file.

    Importing ``sklearn.datasets`` takes 1-3 s (SciPy and more); reading the
    bundled ``digits.csv.gz`` (8x8 pixels then the label, one image a line)
    takes 25 ms, and ``find_spec`` locates it without importing scikit-learn.
    """
    spec = importlib.util.find_spec('sklearn')
    path = osp.join(spec.submodule_search_locations[0], 'datasets', 'data',
                    'digits.csv.gz') if spec and spec.submodule_search_locations else None
    if path is None or not osp.isfile(path):
        # Imported here: only when the data file is not where scikit-learn keeps it.
        from sklearn.datasets import load_digits
        bunch = load_digits()
        return bunch.data.astype(np.float32), bunch.target.astype(np.int64)
    table = np.loadtxt(path, delimiter=',', dtype=np.float32)
    return table[:, :-1], table[:, -1].astype(np.int64)


def _split_mask(labels: np.ndarray, split: str, val_fraction: float) -> np.ndarray:
    if split == 'all':
        return np.ones(len(labels), dtype=bool)
    step = max(int(round(1 / val_fraction)), 2)
    is_val = np.zeros(len(labels), dtype=bool)
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        is_val[idx[::step]] = True
    return is_val if split in ('val', 'test') else ~is_val
