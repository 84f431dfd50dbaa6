"""Classification metrics over a whole evaluation set (numpy/torch, CPU)."""

from typing import Dict, Sequence, Union

import torch

METRICS = ('accuracy', 'accuracy_top5', 'per_class')


def accuracy(scores: torch.Tensor, labels: torch.Tensor, topk: int = 1) -> float:
    """Fraction of samples whose label is among the ``topk`` highest scores."""
    if len(labels) == 0:
        raise ValueError('cannot compute accuracy over zero samples')
    topk = min(topk, scores.shape[1])
    hits = (scores.topk(topk, dim=1).indices == labels[:, None]).any(dim=1)
    return hits.float().mean().item()


def per_class_precision_recall(scores: torch.Tensor, labels: torch.Tensor) -> Dict[str, float]:
    """Mean precision and recall over classes (each class weighted equally)."""
    num_classes = scores.shape[1]
    pred = scores.argmax(dim=1)
    precisions, recalls = [], []
    for c in range(num_classes):
        tp = ((pred == c) & (labels == c)).sum().item()
        predicted, actual = (pred == c).sum().item(), (labels == c).sum().item()
        if predicted:
            precisions.append(tp / predicted)
        if actual:
            recalls.append(tp / actual)
    return {'precision': sum(precisions) / max(len(precisions), 1),
            'recall': sum(recalls) / max(len(recalls), 1)}


def evaluate_classification(scores: torch.Tensor, labels: torch.Tensor,
                            metric: Union[str, Sequence[str]] = 'accuracy') -> Dict[str, float]:
    """Compute the named metrics.

    Args:
        scores: ``(N, num_classes)`` scores or probabilities.
        labels: ``(N,)`` integer labels.
        metric: ``'accuracy'``, ``'accuracy_top5'``, ``'per_class'`` or a list.
    """
    metrics = [metric] if isinstance(metric, str) else list(metric)
    results: Dict[str, float] = {}
    for name in metrics:
        if name == 'accuracy':
            results['accuracy'] = accuracy(scores, labels, 1)
        elif name == 'accuracy_top5':
            results['accuracy_top5'] = accuracy(scores, labels, 5)
        elif name == 'per_class':
            results.update(per_class_precision_recall(scores, labels))
        else:
            raise ValueError(f"unknown metric '{name}'; available: {', '.join(METRICS)}")
    return results
