"""Metrics computed from a whole evaluation set's predictions."""

from .confusion_plot import save_confusion_matrix
from .metrics import (METRICS, accuracy, confusion_matrix, evaluate_classification,
                      per_class_precision_recall)

__all__ = ['METRICS', 'accuracy', 'confusion_matrix', 'evaluate_classification',
           'per_class_precision_recall', 'save_confusion_matrix']
