"""Small facts about a model: its device, its weights without a wrapper's prefix."""

from typing import Dict

import torch
from torch import nn


def module_device(module: nn.Module) -> torch.device:
    """The device of ``module``'s first parameter (the CPU for a model without parameters)."""
    for tensor in module.parameters():
        return tensor.device
    return torch.device('cpu')


def strip_wrapper_prefix(state: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """``state`` with the ``module.`` prefix a wrapper (DDP, mmcv's) adds removed from its keys."""
    return {k[len('module.'):] if k.startswith('module.') else k: v for k, v in state.items()}
