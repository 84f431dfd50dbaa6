"""Models that follow mtrain's model contract, and mmcv 1.x's ``BaseModule`` family."""

from .base_module import BaseModule, ModuleDict, ModuleList, Sequential
from .classifiers import ClassifierBase, LeNet, MLPClassifier
from .heads import LinearClsHead
from .image_classifier import ImageClassifier
from .initializers import initialize
from .multitask import MultiTaskClassifier

__all__ = ['BaseModule', 'ClassifierBase', 'ImageClassifier', 'LeNet', 'LinearClsHead',
           'MLPClassifier', 'ModuleDict', 'ModuleList', 'MultiTaskClassifier', 'Sequential',
           'initialize']
