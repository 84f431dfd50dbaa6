"""Metrics computed from a whole evaluation set's predictions."""

from .metrics import METRICS, accuracy, evaluate_classification, per_class_precision_recall

__all__ = ['METRICS', 'accuracy', 'evaluate_classification', 'per_class_precision_recall']
