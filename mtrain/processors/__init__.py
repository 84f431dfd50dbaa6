"""Batch processors: what one training step does with the loader's output."""

from .basic import BasicBatchProcessor
from .losses import parse_losses
from .to_device import batch_size, to_device

__all__ = ['BasicBatchProcessor', 'batch_size', 'parse_losses', 'to_device']
