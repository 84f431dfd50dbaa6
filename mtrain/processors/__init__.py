"""Batch processors: what one training step does with the loader's output."""

from .base import BatchProcessor
from .basic import BasicBatchProcessor
from .losses import parse_losses
from .multi_batch import MicroBatch, MultiBatchProcessor
from .to_device import batch_size, to_device

__all__ = ['BasicBatchProcessor', 'BatchProcessor', 'MicroBatch', 'MultiBatchProcessor', 'batch_size',
           'parse_losses', 'to_device']
