"""Models that follow mtrain's model contract."""

from .classifiers import ClassifierBase, LeNet, MLPClassifier
from .heads import LinearClsHead
from .image_classifier import ImageClassifier
from .multitask import MultiTaskClassifier

__all__ = ['ClassifierBase', 'ImageClassifier', 'LeNet', 'LinearClsHead', 'MLPClassifier',
           'MultiTaskClassifier']
