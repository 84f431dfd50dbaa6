"""Top-k accuracy, per-class precision/recall and the confusion matrix, checked by hand."""

import pytest
import torch
from PIL import Image

from mtrain.evaluation import confusion_matrix, evaluate_classification, save_confusion_matrix

# 6 samples, 3 classes. Arg-max predictions: 0, 1, 1, 2, 0, 2; labels: 0, 1, 2, 2, 1, 0.
SCORES = torch.tensor([[.7, .2, .1], [.1, .8, .1], [.2, .5, .3],
                       [.1, .2, .7], [.5, .4, .1], [.2, .3, .5]])
LABELS = torch.tensor([0, 1, 2, 2, 1, 0])


def test_top1_and_topk_accuracy():
    results = evaluate_classification(SCORES, LABELS,
                                      ['accuracy', 'accuracy_top2', 'accuracy_top5'])
    # top-2 misses only sample 5 (label 0 is its lowest score)
    assert results == pytest.approx(
        {'accuracy': 3 / 6, 'accuracy_top2': 5 / 6, 'accuracy_top5': 1.0})


def test_confusion_matrix_and_per_class_precision_recall():
    assert confusion_matrix(SCORES, LABELS).tolist() == [[1, 0, 1], [1, 1, 0], [0, 1, 1]]
    results = evaluate_classification(SCORES, LABELS, 'per_class',
                                      class_names=['cat', 'dog', 'fox'])
    assert results == pytest.approx({
        'precision': 0.5, 'recall': 0.5,
        'precision_cat': 1 / 2, 'recall_cat': 1 / 2, 'precision_dog': 1 / 2, 'recall_dog': 1 / 2,
        'precision_fox': 1 / 2, 'recall_fox': 1 / 2})


def test_a_class_never_predicted_reports_zero_but_stays_out_of_the_mean():
    scores = torch.tensor([[.9, .1, 0.], [.2, .8, 0.], [.6, .4, 0.]])
    results = evaluate_classification(scores, torch.tensor([0, 1, 2]), 'per_class')
    assert results['precision_2'] == 0.0 and results['recall_2'] == 0.0
    assert results['precision'] == pytest.approx((1 / 2 + 1) / 2)  # classes 0 and 1 only


def test_unknown_metric_lists_the_available_ones():
    with pytest.raises(ValueError, match='accuracy_top<k>'):
        evaluate_classification(SCORES, LABELS, 'f1')


def test_the_confusion_matrix_png_opens(tmp_path):
    path = save_confusion_matrix(confusion_matrix(SCORES, LABELS), ['cat', 'dog', 'fox'],
                                 str(tmp_path / 'sub' / 'cm.png'))
    with Image.open(path) as png:
        png.verify()
        assert png.format == 'PNG'
