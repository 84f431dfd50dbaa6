"""Models that follow mtrain's model contract."""

from .classifiers import ClassifierBase, LeNet, MLPClassifier

__all__ = ['ClassifierBase', 'LeNet', 'MLPClassifier']
