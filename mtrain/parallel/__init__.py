"""Model wrappers: one interface for one process and for DDP."""

from ..utils.autograd import unused_parameters
from .batch_call import call_with_batch, has_own_steps
from .distributed import MTDistributedDataParallel
from .fsdp import MTFullyShardedDataParallel
from .mmcv_wrappers import MMDataParallel, MMDistributedDataParallel
from .wrapper import ModelWrapper, is_module_wrapper, unwrap

__all__ = ['MMDataParallel', 'MMDistributedDataParallel', 'MTDistributedDataParallel',
           'MTFullyShardedDataParallel', 'ModelWrapper', 'call_with_batch', 'has_own_steps',
           'is_module_wrapper', 'unused_parameters', 'unwrap']
