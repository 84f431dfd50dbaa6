"""mmcv 1.x's mixed-precision decorators (``mmcv.runner.fp16_utils``) on ``torch.autocast``.

1.x-era models decorate methods at class-definition time::

    class Head(BaseModule):
        def __init__(self):
            super().__init__()
            self.fp16_enabled = False          # wrap_fp16_model (the fp16 hook) sets it

        @auto_fp16(apply_to=('x', ))
        def forward(self, x): ...              # in half precision when fp16 is on

        @force_fp32(apply_to=('cls_score', ))
        def loss(self, cls_score, label): ...  # always in fp32

A decorated method does nothing special until its module's ``fp16_enabled``
is True (``wrap_fp16_model(model)`` sets it on every module that has the
attribute). Then, as under mmcv 1.7.2 with torch >= 1.6:

- ``auto_fp16``: the fp32 tensors among the ``apply_to`` arguments (all
  arguments when None) are cast to the half dtype and the method runs under
  autocast; ``out_fp32=True`` casts half outputs back to fp32.
- ``force_fp32``: the half tensors among ``apply_to`` are cast to fp32 and
  the method runs with autocast off; ``out_fp16=True`` casts fp32 outputs to
  the half dtype.

Where it differs from mmcv (docs/migration.md): the half dtype is the run's
``fp16.dtype``, which the fp16 hook passes to ``wrap_fp16_model`` (``fp16 =
dict(dtype='bfloat16')`` gives bf16), else float16; the autocast is that of
the module's device (mmcv's is always CUDA's), so a CPU run is mixed
precision too; ``force_fp32`` also casts bf16 inputs.
"""

import functools
from collections import abc
from inspect import getfullargspec
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import numpy as np
import torch
from torch import nn

from ..utils.modules import module_device, wrap_fp16_model

_HALF = (torch.float16, torch.bfloat16)


def cast_tensor_type(inputs: Any, src_type: Any, dst_type: torch.dtype) -> Any:
    """``inputs`` with every tensor of ``src_type`` (a dtype or a tuple of them) cast to ``dst_type``.

    Recurses into mappings and iterables (rebuilt with their own type);
    modules, strings, arrays and other objects are returned as they are.
    """
    if isinstance(inputs, torch.Tensor):
        src = src_type if isinstance(src_type, tuple) else (src_type, )
        return inputs.to(dst_type) if inputs.dtype in src else inputs
    if isinstance(inputs, (nn.Module, str, np.ndarray)):
        return inputs
    if isinstance(inputs, abc.Mapping):
        return type(inputs)({k: cast_tensor_type(v, src_type, dst_type)
                             for k, v in inputs.items()})
    if isinstance(inputs, abc.Iterable):
        return type(inputs)(cast_tensor_type(v, src_type, dst_type) for v in inputs)
    return inputs


def _autocast_state(module: nn.Module) -> Tuple[str, torch.dtype]:
    """The module's device type and its half dtype, as :func:`wrap_fp16_model` told it.

    Told, not inferred from whatever autocast is active: a bf16 run's
    decorated method runs in bf16 in training and in a later
    ``single_gpu_test`` alike. A module switched on by hand
    (``fp16_enabled = True``) uses float16, as mmcv.
    """
    return module_device(module).type, getattr(module, 'fp16_dtype', torch.float16)


def _cast_arguments(func: Callable, apply_to: Optional[Iterable], args: tuple, kwargs: dict,
                    src_type: Any, dst_type: torch.dtype) -> Tuple[list, dict]:
    """Cast the named arguments (all when ``apply_to`` is None) as mmcv does.

    Positional arguments are matched to the names of ``func``'s own signature
    (defaults are not cast, as in mmcv); keyword arguments by name.
    """
    names = getfullargspec(func).args
    to_cast = names if apply_to is None else apply_to
    new_args = [cast_tensor_type(value, src_type, dst_type) if name in to_cast else value
                for name, value in zip(names, args)]
    new_args += list(args[len(names):])
    new_kwargs = {name: cast_tensor_type(value, src_type, dst_type) if name in to_cast else value
                  for name, value in kwargs.items()}
    return new_args, new_kwargs


def auto_fp16(apply_to: Optional[Iterable] = None, out_fp32: bool = False,
              supported_types: tuple = (nn.Module, )) -> Callable:
    """Run the decorated method in half precision when its module's ``fp16_enabled`` is True.

    Args:
        apply_to: names of the arguments to cast to half; None: all.
        out_fp32: cast half outputs back to fp32.
        supported_types: classes whose methods may be decorated; a call on
            any other ``self`` raises ``TypeError``.
    """
    def decorator(old_func: Callable) -> Callable:
        @functools.wraps(old_func)
        def new_func(*args, **kwargs) -> Any:
            if not isinstance(args[0], supported_types):
                raise TypeError('@auto_fp16 can only be used to decorate the '
                                f'method of those classes {supported_types}')
            if not getattr(args[0], 'fp16_enabled', False):
                return old_func(*args, **kwargs)
            device_type, half = _autocast_state(args[0])
            new_args, new_kwargs = _cast_arguments(old_func, apply_to, args, kwargs,
                                                   torch.float32, half)
            with torch.autocast(device_type, dtype=half):
                output = old_func(*new_args, **new_kwargs)
            return cast_tensor_type(output, half, torch.float32) if out_fp32 else output

        return new_func

    return decorator


def force_fp32(apply_to: Optional[Iterable] = None, out_fp16: bool = False) -> Callable:
    """Run the decorated method in fp32 (autocast off) when its module's ``fp16_enabled`` is True.

    Args:
        apply_to: names of the arguments to cast from half to fp32; None: all.
        out_fp16: cast fp32 outputs to the half dtype.
    """
    def decorator(old_func: Callable) -> Callable:
        @functools.wraps(old_func)
        def new_func(*args, **kwargs) -> Any:
            if not isinstance(args[0], nn.Module):
                raise TypeError('@force_fp32 can only be used to decorate the method of nn.Module')
            if not getattr(args[0], 'fp16_enabled', False):
                return old_func(*args, **kwargs)
            device_type, half = _autocast_state(args[0])
            new_args, new_kwargs = _cast_arguments(old_func, apply_to, args, kwargs,
                                                   _HALF, torch.float32)
            with torch.autocast(device_type, enabled=False):
                output = old_func(*new_args, **new_kwargs)
            return cast_tensor_type(output, torch.float32, half) if out_fp16 else output

        return new_func

    return decorator


class LossScaler:
    """mmcv 1.x's manual loss scaler (its fp16 hook's before torch 1.6), for code that uses it.

    mtrain's fp16 hook scales with ``torch.amp.GradScaler``; this class keeps
    mmcv's arithmetic for 1.x code that drives it by hand. ``'dynamic'``: an
    overflow divides the scale by ``scale_factor`` (never below 1); every
    ``scale_window`` iterations after the last overflow multiply it by
    ``scale_factor``. ``'static'``: the scale never changes and overflow is
    never reported.

    Args:
        init_scale: the first scale.
        mode: ``'dynamic'`` or ``'static'``.
        scale_factor: what the scale is divided or multiplied by.
        scale_window: overflow-free iterations before the scale grows.
    """

    def __init__(self, init_scale: float = 2**32, mode: str = 'dynamic',
                 scale_factor: float = 2., scale_window: int = 1000) -> None:
        assert mode in ('dynamic', 'static'), 'mode can only be dynamic or static'
        self.cur_scale = init_scale
        self.cur_iter = 0
        self.mode = mode
        self.last_overflow_iter = -1
        self.scale_factor = scale_factor
        self.scale_window = scale_window

    def has_overflow(self, params: List[nn.Parameter]) -> bool:
        """Whether any gradient holds an inf or NaN (always False in static mode)."""
        if self.mode != 'dynamic':
            return False
        return any(p.grad is not None and self._has_inf_or_nan(p.grad.data) for p in params)

    @staticmethod
    def _has_inf_or_nan(x: torch.Tensor) -> bool:
        total = float(x.float().sum())
        return total in (float('inf'), -float('inf')) or total != total

    def update_scale(self, overflow: bool) -> None:
        """Count one iteration; shrink the scale after an overflow, grow it after a quiet window."""
        if self.mode != 'dynamic':
            return
        if overflow:
            self.cur_scale = max(self.cur_scale / self.scale_factor, 1)
            self.last_overflow_iter = self.cur_iter
        elif (self.cur_iter - self.last_overflow_iter) % self.scale_window == 0:
            self.cur_scale *= self.scale_factor
        self.cur_iter += 1

    def state_dict(self) -> Dict[str, Any]:
        return dict(cur_scale=self.cur_scale, cur_iter=self.cur_iter, mode=self.mode,
                    last_overflow_iter=self.last_overflow_iter,
                    scale_factor=self.scale_factor, scale_window=self.scale_window)

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        for key in ('cur_scale', 'cur_iter', 'mode', 'last_overflow_iter', 'scale_factor',
                    'scale_window'):
            setattr(self, key, state_dict[key])

    @property
    def loss_scale(self) -> float:
        return self.cur_scale


__all__ = ['LossScaler', 'auto_fp16', 'cast_tensor_type', 'force_fp32', 'wrap_fp16_model']
