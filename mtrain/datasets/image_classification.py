"""An image classification dataset in the model contract: ``dict(img, gt_label)``."""

import logging
import os.path as osp
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import torch

from ..evaluation import (CLASSIFICATION_METRICS, confusion_matrix, evaluate_classification,
                          save_confusion_matrix)
from ..utils import print_log


class ImageClassificationDataset(torch.utils.data.Dataset):
    """Wrap a dataset of ``(image, label)`` pairs: apply ``pipeline`` to the image.

    Each item is ``{'img': pipeline(image), 'gt_label': label}``, what
    :class:`ImageClassifier` and the other classifiers take. ``evaluate``
    scores a whole set of predictions and, given an ``out_dir``, draws the
    confusion matrix there (the ``EvalHook`` passes the work dir).

    This is what the torchvision dataset entries (``ImageFolder``, ``CIFAR10``,
    ...) build; wrap your own ``(image, label)`` dataset the same way to get
    pipelines and evaluation for free.

    Args:
        dataset: indexable, ``dataset[i] -> (image, label)``.
        pipeline: applied to each image (e.g. from :func:`build_pipeline`).
        classes: class names (default: ``dataset.classes`` when it exists).
    """

    METRICS = CLASSIFICATION_METRICS  # checked against `evaluation` before training

    def __init__(self, dataset: Any, pipeline: Optional[Callable] = None,
                 classes: Optional[Sequence[str]] = None) -> None:
        self.dataset = dataset
        self.pipeline = pipeline
        names = classes if classes is not None else getattr(dataset, 'classes', None)
        self.CLASSES = tuple(str(c) for c in names) if names is not None else None
        self._gt_labels: Optional[torch.Tensor] = None

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Dict[str, Any]:
        img, label = self.dataset[index]
        if self.pipeline is not None:
            img = self.pipeline(img)
        if isinstance(img, torch.Tensor):
            img = img.as_subclass(torch.Tensor)  # a plain tensor batches and moves fastest
        return {'img': img, 'gt_label': torch.as_tensor(int(label), dtype=torch.long)}

    def get_gt_labels(self) -> torch.Tensor:
        """All labels in dataset order (from ``targets``/``labels`` where the dataset has them)."""
        if self._gt_labels is None:
            for attr in ('targets', 'labels', '_labels'):
                labels = getattr(self.dataset, attr, None)
                if labels is not None and len(labels) == len(self):
                    break
            else:  # e.g. FakeData: its labels exist only per item
                labels = [int(self.dataset[i][1]) for i in range(len(self))]
            self._gt_labels = torch.as_tensor(labels, dtype=torch.long).reshape(-1)
        return self._gt_labels

    def evaluate(self, results: torch.Tensor, metric: Union[str, Sequence[str]] = 'accuracy',
                 logger: Any = None, out_dir: Optional[str] = None, tag: Optional[str] = None,
                 confusion_matrix_png: bool = True) -> Dict[str, float]:
        """Score ``results`` (``(N, C)`` class scores in dataset order).

        Args:
            results: the predictions of the whole set.
            metric: see :func:`evaluate_classification` (``'accuracy'``,
                ``'accuracy_top5'``, ``'per_class'``, ...).
            logger: where to say that a plot was written.
            out_dir: where to write ``confusion_matrix[_<tag>].png`` (None: no plot).
            tag: names the evaluation in the file name, e.g. ``'epoch_3'``.
            confusion_matrix_png: set False (``evaluation=dict(confusion_matrix_png=False)``)
                to skip the plot.
        """
        scores = torch.as_tensor(results).float()
        labels = self.get_gt_labels()
        if len(scores) != len(labels):
            raise ValueError(f'got {len(scores)} predictions for {len(labels)} samples; '
                             'evaluate the whole set in dataset order')
        names = self._class_names(scores.shape[1], logger)
        metrics = evaluate_classification(scores, labels, metric, class_names=names)
        if out_dir is not None and confusion_matrix_png:
            name = f'confusion_matrix_{tag}.png' if tag else 'confusion_matrix.png'
            path = osp.join(out_dir, name)
            save_confusion_matrix(confusion_matrix(scores, labels), names, path)
            print_log(f'confusion matrix written to {path}', logger)
        return metrics

    def _class_names(self, num_classes: int, logger: Any = None) -> List[str]:
        if self.CLASSES is None:
            return [str(c) for c in range(num_classes)]
        if len(self.CLASSES) != num_classes:
            shown = ', '.join(self.CLASSES[:5]) + (', ...' if len(self.CLASSES) > 5 else '')
            print_log(f'the model scores {num_classes} classes but the dataset has '
                      f'{len(self.CLASSES)} ({shown}); set '
                      f'model.head.num_classes={len(self.CLASSES)}', logger, logging.WARNING)
            return [str(c) for c in range(num_classes)]
        return list(self.CLASSES)
