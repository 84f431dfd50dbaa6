"""Optimizers: every ``torch.optim`` optimizer by name, param groups, the default constructor.

Importing this package registers each ``torch.optim.Optimizer`` subclass in
``OPTIMIZERS`` under its class name (a name registered earlier, e.g. a user's own
``SGD``, is left alone), and ``DefaultOptimizerConstructor`` in
``OPTIMIZER_CONSTRUCTORS``. See ``docs/optimizer.md``.
"""

import inspect
from typing import List

import torch

from ..registry import OPTIMIZERS
from .builder import build_optimizer, build_optimizer_constructor, build_optimizers
from .constructor import (DefaultOptimizerConstructor, DefaultOptimWrapperConstructor,
                          explain_param_groups, get_param_groups, plan_param_groups,
                          summarize_optimizer, unwrap_model)
from .merged_groups import (keep_groups_per_parameter, merge_param_groups,
                            per_parameter_state_to_merged)
from .param_groups import ParamGroupPlan, validate_paramwise_cfg


def _register_torch_optimizers() -> List[str]:
    """Register ``torch.optim``'s optimizers (not the abstract base) and return their names."""
    names = []
    for name in dir(torch.optim):
        obj = getattr(torch.optim, name)
        if (inspect.isclass(obj) and issubclass(obj, torch.optim.Optimizer)
                and obj is not torch.optim.Optimizer):
            if name not in OPTIMIZERS.module_dict:
                OPTIMIZERS.register_module(name=name, module=obj, force=False)
            names.append(name)
    return names


TORCH_OPTIMIZERS = _register_torch_optimizers()

__all__ = [
    'DefaultOptimizerConstructor', 'DefaultOptimWrapperConstructor', 'ParamGroupPlan', 'TORCH_OPTIMIZERS', 'build_optimizer',
    'build_optimizer_constructor', 'build_optimizers', 'explain_param_groups',
    'get_param_groups', 'keep_groups_per_parameter', 'merge_param_groups', 'per_parameter_state_to_merged',
    'plan_param_groups', 'summarize_optimizer', 'unwrap_model', 'validate_paramwise_cfg'
]
