"""Model wrappers: one interface for one process and for DDP."""

from .batch_call import call_with_batch
from .distributed import MTDistributedDataParallel, unused_parameters
from .fsdp import MTFullyShardedDataParallel
from .wrapper import ModelWrapper

__all__ = ['MTDistributedDataParallel', 'MTFullyShardedDataParallel', 'ModelWrapper',
           'call_with_batch', 'unused_parameters']
