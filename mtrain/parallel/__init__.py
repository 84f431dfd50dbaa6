"""Model wrappers: one interface for one process and for DDP."""

from .batch_call import call_with_batch
from ..utils.autograd import unused_parameters
from .distributed import MTDistributedDataParallel
from .fsdp import MTFullyShardedDataParallel
from .wrapper import ModelWrapper

__all__ = ['MTDistributedDataParallel', 'MTFullyShardedDataParallel', 'ModelWrapper',
           'call_with_batch', 'unused_parameters']
