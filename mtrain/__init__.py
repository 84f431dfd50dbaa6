"""mtrain: a config-driven PyTorch training framework (the mmcv 1.x runner design).

mmcv 1.x's runner-side API is here by name, so ``from mmcv.runner import X``
becomes ``from mtrain import X`` (see docs/migration.md for the table)::

    from mtrain import (EpochBasedRunner, Hook, HOOKS, build_optimizer, load_checkpoint,
                        MMDistributedDataParallel, get_dist_info)

The names are imported on first use, so ``import mtrain`` stays cheap.
"""

import importlib
from typing import Any, List

__version__ = '0.1.0'

# name -> (module, attribute); any other name ending in ``Hook`` comes from mtrain.hooks.
_RUNNER = ('BaseRunner', 'EpochBasedRunner', 'IterBasedRunner', 'IterLoader', 'LogBuffer',
           'Preempted')
_CHECKPOINT = ('save_checkpoint', 'load_checkpoint', 'load_state_dict', 'get_state_dict',
               'weights_to_cpu', 'load_checkpoint_with_prefix', '_load_checkpoint_with_prefix',
               '_load_checkpoint', 'CheckpointError')
_OPTIM = ('build_optimizer', 'build_optimizers', 'build_optimizer_constructor',
          'DefaultOptimizerConstructor')
_PARALLEL = ('MMDataParallel', 'MMDistributedDataParallel', 'ModelWrapper',
             'MTDistributedDataParallel', 'is_module_wrapper', 'DataContainer', 'collate',
             'scatter', 'scatter_kwargs')
_MODULES = ('BaseModule', 'Sequential', 'ModuleList', 'ModuleDict')
_FP16 = ('auto_fp16', 'force_fp32', 'wrap_fp16_model', 'LossScaler')
_REGISTRY = ('HOOKS', 'RUNNERS', 'OPTIMIZERS', 'OPTIMIZER_CONSTRUCTORS', 'MODEL_WRAPPERS',
             'MODELS', 'DATASETS', 'INITIALIZERS')
_UTILS = ('get_dist_info', 'init_dist', 'master_only', 'get_priority', 'Priority',
          'set_random_seed', 'get_logger', 'print_log')
_DIST = ('allreduce_grads', 'allreduce_params')
_NAMES = {
    **{n: ('mtrain.runner', n) for n in _RUNNER},
    **{n: ('mtrain.runner.checkpoint', n) for n in _CHECKPOINT},
    **{n: ('mtrain.optim', n) for n in _OPTIM},
    **{n: ('mtrain.parallel', n) for n in _PARALLEL},
    **{n: ('mtrain.models.base_module', n) for n in _MODULES},
    **{n: ('mtrain.models.fp16_utils', n) for n in _FP16},
    **{n: ('mtrain.registry', n) for n in _REGISTRY},
    **{n: ('mtrain.utils', n) for n in _UTILS},
    **{n: ('mtrain.utils.dist', n) for n in _DIST},
    # mmcv's other names for the same things
    'Runner': ('mtrain.runner', 'EpochBasedRunner'),
    'OPTIMIZER_BUILDERS': ('mtrain.registry', 'OPTIMIZER_CONSTRUCTORS'),
    'MODULE_WRAPPERS': ('mtrain.registry', 'MODEL_WRAPPERS'),
}


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        module, attr = _NAMES[name]
    elif name.endswith('Hook') or name == 'STAGES':
        module, attr = 'mtrain.hooks', name
    else:
        raise AttributeError(f"module 'mtrain' has no attribute '{name}'")
    try:
        value = getattr(importlib.import_module(module), attr)
    except AttributeError:
        raise AttributeError(f"module 'mtrain' has no attribute '{name}' (see "
                             'docs/migration.md for what replaces it)') from None
    globals()[name] = value  # looked up once
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_NAMES))
