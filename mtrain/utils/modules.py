"""Small facts about a model: its device, its weights without a wrapper's prefix, fp16 flags."""

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


def wrap_fp16_model(model: nn.Module, dtype: torch.dtype = torch.float16) -> None:
    """Set ``fp16_enabled = True`` on every module of ``model`` that has the attribute.

    mmcv 1.x's switch for its ``@auto_fp16`` / ``@force_fp32`` methods
    (:mod:`mtrain.models.fp16_utils`), which the fp16 optimizer hook flips
    before the run. The model stays fp32 (autocast picks each op's
    precision), as mmcv 1.7.2 does on torch >= 1.6. ``dtype`` (mtrain's: the
    run's ``fp16.dtype``) is the half dtype those methods use, stored as
    ``fp16_dtype`` on the same modules: told once, the same in training and
    in a later ``single_gpu_test`` whatever autocast is active then.
    """
    for m in model.modules():
        if hasattr(m, 'fp16_enabled'):
            m.fp16_enabled = True
            m.fp16_dtype = dtype
