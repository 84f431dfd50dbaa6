"""Classification metrics over a whole evaluation set (numpy/torch, CPU)."""

import re
from typing import Dict, Optional, Sequence, Union

import torch

#: Metric names ``evaluate_classification`` knows; any ``accuracy_top<k>`` works too.
METRICS = ('accuracy', 'accuracy_top5', 'per_class', 'precision', 'recall')

#: What a classification dataset declares as its ``METRICS`` (see
#: :mod:`mtrain.hooks.eval_checks`): the ``metric`` names above and the keys
#: they return, ``*`` for any text.
CLASSIFICATION_METRICS = ('accuracy', 'accuracy_top*', 'per_class', 'precision', 'recall',
                          'precision_*', 'recall_*')

_TOPK = re.compile(r'accuracy_top(\d+)$')


def accuracy(scores: torch.Tensor, labels: torch.Tensor, topk: int = 1) -> float:
    """Fraction of samples whose label is among the ``topk`` highest scores."""
    if len(labels) == 0:
        raise ValueError('cannot compute accuracy over zero samples')
    topk = min(topk, scores.shape[1])
    hits = (scores.topk(topk, dim=1).indices == labels[:, None]).any(dim=1)
    return hits.float().mean().item()


def confusion_matrix(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``(C, C)`` counts: row = true class, column = predicted (arg-max) class."""
    num_classes = scores.shape[1]
    pred = scores.argmax(dim=1)
    flat = labels.long() * num_classes + pred
    return torch.bincount(flat, minlength=num_classes ** 2).reshape(num_classes, num_classes)


def per_class_precision_recall(scores: torch.Tensor, labels: torch.Tensor,
                               class_names: Optional[Sequence[str]] = None) -> Dict[str, float]:
    """Precision and recall of every class, and their means.

    The means weight each class equally and leave out classes with nothing
    predicted (precision) or no sample (recall), whose values are undefined
    (and reported as 0 in the per-class entries).

    Returns:
        ``{'precision': mean, 'recall': mean, 'precision_<name>': ..., 'recall_<name>': ...}``
        with ``<name>`` from ``class_names`` (default: the class index).
    """
    matrix = confusion_matrix(scores, labels).double()
    true_pos = matrix.diag()
    predicted, actual = matrix.sum(dim=0), matrix.sum(dim=1)
    names = list(class_names) if class_names is not None else []
    if len(names) != scores.shape[1]:
        names = [str(c) for c in range(scores.shape[1])]
    results: Dict[str, float] = {}
    precisions, recalls = [], []
    for c, name in enumerate(names):
        # Undefined values are logged as 0 so every evaluation has the same keys.
        results[f'precision_{name}'] = results[f'recall_{name}'] = 0.0
        if predicted[c] > 0:
            precisions.append((true_pos[c] / predicted[c]).item())
            results[f'precision_{name}'] = precisions[-1]
        if actual[c] > 0:
            recalls.append((true_pos[c] / actual[c]).item())
            results[f'recall_{name}'] = recalls[-1]
    means = {'precision': sum(precisions) / max(len(precisions), 1),
             'recall': sum(recalls) / max(len(recalls), 1)}
    return {**means, **results}


def evaluate_classification(scores: torch.Tensor, labels: torch.Tensor,
                            metric: Union[str, Sequence[str]] = 'accuracy',
                            class_names: Optional[Sequence[str]] = None) -> Dict[str, float]:
    """Compute the named metrics.

    Args:
        scores: ``(N, num_classes)`` scores or probabilities.
        labels: ``(N,)`` integer labels.
        metric: ``'accuracy'`` (top-1), ``'accuracy_top<k>'`` (e.g.
            ``'accuracy_top5'``), ``'per_class'`` (precision/recall of each
            class and their means), ``'precision'`` or ``'recall'`` (the
            means only) or a list of these.
        class_names: names used in the ``per_class`` keys.
    """
    metrics = [metric] if isinstance(metric, str) else list(metric)
    results: Dict[str, float] = {}
    for name in metrics:
        topk = _TOPK.match(name)
        if name == 'accuracy':
            results['accuracy'] = accuracy(scores, labels, 1)
        elif topk and int(topk.group(1)) > 0:
            results[name] = accuracy(scores, labels, int(topk.group(1)))
        elif name == 'per_class':
            results.update(per_class_precision_recall(scores, labels, class_names))
        elif name in ('precision', 'recall'):
            results[name] = per_class_precision_recall(scores, labels)[name]
        else:
            raise ValueError(f"unknown metric '{name}'; available: {', '.join(METRICS)} "
                             '(or accuracy_top<k> for any k)')
    return results
