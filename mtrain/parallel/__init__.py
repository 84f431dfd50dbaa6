"""Model wrappers: one interface for one process and for DDP; mmcv's DataContainer batches."""

from ..registry import MODEL_WRAPPERS as MODULE_WRAPPERS  # mmcv's name
from ..utils.autograd import unused_parameters
from ..utils.data_container import DataContainer, collate
from .batch_call import call_with_batch, has_own_steps
from .distributed import MTDistributedDataParallel
from .fsdp import MTFullyShardedDataParallel
from .mmcv_wrappers import MMDataParallel, MMDistributedDataParallel
from .scatter_gather import scatter, scatter_kwargs
from .wrapper import ModelWrapper, is_module_wrapper, unwrap

__all__ = ['DataContainer', 'MMDataParallel', 'MMDistributedDataParallel', 'MODULE_WRAPPERS',
           'MTDistributedDataParallel', 'MTFullyShardedDataParallel', 'ModelWrapper',
           'call_with_batch', 'collate', 'has_own_steps', 'is_module_wrapper', 'scatter',
           'scatter_kwargs', 'unused_parameters', 'unwrap']
