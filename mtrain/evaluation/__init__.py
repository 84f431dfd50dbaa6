"""Metrics computed from a whole evaluation set's predictions, and the inference behind them."""

from .collect import collect_results_cpu, collect_results_gpu
from .confusion_plot import save_confusion_matrix
from .inference import multi_gpu_test, single_gpu_test, uses_mmcv_contract
from .metrics import (CLASSIFICATION_METRICS, METRICS, accuracy, confusion_matrix,
                      evaluate_classification, per_class_precision_recall)

__all__ = ['CLASSIFICATION_METRICS', 'METRICS', 'accuracy', 'collect_results_cpu',
           'collect_results_gpu', 'confusion_matrix', 'evaluate_classification',
           'multi_gpu_test', 'per_class_precision_recall', 'save_confusion_matrix',
           'single_gpu_test', 'uses_mmcv_contract']
