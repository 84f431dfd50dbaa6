"""Model wrappers: one interface for one process and for DDP."""

from .batch_call import call_with_batch
from .wrapper import ModelWrapper

__all__ = ['ModelWrapper', 'call_with_batch']
