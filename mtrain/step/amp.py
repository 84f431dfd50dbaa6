"""Mixed-precision settings: the autocast dtype and the loss scale, parsed and checked once.

mmcv 1.x's ``fp16 = dict(loss_scale=...)`` keys, read into what
``torch.autocast`` and ``torch.amp.GradScaler`` take::

    fp16 = dict(loss_scale=512.)                 # static scale (mmcv's default value)
    fp16 = dict(loss_scale='dynamic')            # GradScaler's defaults
    fp16 = dict(loss_scale=dict(init_scale=2.**16, growth_interval=1000))
    fp16 = dict(dtype='bfloat16')                # bf16 autocast, no scaling
"""

import warnings
from typing import Any, Dict, Optional, Tuple, Union

import torch

DTYPES = {'float16': torch.float16, 'fp16': torch.float16, 'half': torch.float16,
          'bfloat16': torch.bfloat16, 'bf16': torch.bfloat16}
SCALER_ARGS = ('init_scale', 'growth_factor', 'backoff_factor', 'growth_interval')
MMCV_DEFAULT_SCALE = 512.


def parse_dtype(dtype: Union[str, torch.dtype]) -> torch.dtype:
    """``'float16'``/``'bfloat16'`` (or the dtype itself) as a ``torch.dtype``."""
    if isinstance(dtype, torch.dtype) and dtype in (torch.float16, torch.bfloat16):
        return dtype
    if isinstance(dtype, str) and dtype in DTYPES:
        return DTYPES[dtype]
    raise ValueError(f"fp16 dtype must be 'float16' or 'bfloat16', got {dtype!r}")


def parse_loss_scale(loss_scale: Any) -> Tuple[Dict[str, Any], Optional[float]]:
    """``(GradScaler kwargs, static scale or None)`` for a ``loss_scale`` config value."""
    if isinstance(loss_scale, (int, float)) and not isinstance(loss_scale, bool):
        if not loss_scale > 0 or loss_scale == float('inf'):
            raise ValueError(f'fp16 loss_scale must be a positive finite number, '
                             f'got {loss_scale!r}')
        return dict(init_scale=float(loss_scale)), float(loss_scale)
    if loss_scale == 'dynamic':
        return {}, None
    if isinstance(loss_scale, dict):
        unknown = sorted(set(loss_scale) - set(SCALER_ARGS))
        if unknown:
            raise ValueError(f'fp16 loss_scale dict has unknown keys {unknown}; GradScaler '
                             f'accepts {", ".join(SCALER_ARGS)}')
        return dict(loss_scale), None
    raise TypeError(f"fp16 loss_scale must be a number (static scale), 'dynamic' or a dict of "
                    f'GradScaler arguments ({", ".join(SCALER_ARGS)}), got {loss_scale!r}')


def check_autocast_support(device: torch.device, dtype: torch.dtype) -> None:
    """Raise a ``RuntimeError`` naming the way out when ``device`` cannot autocast to ``dtype``."""
    name = {torch.float16: 'float16', torch.bfloat16: 'bfloat16'}[dtype]
    if not torch.amp.is_autocast_available(device.type):
        raise RuntimeError(f'fp16: torch.autocast is not available on device {device.type!r}; '
                           'set fp16=None to train in full precision')
    if dtype == torch.bfloat16 and device.type == 'cuda' and not torch.cuda.is_bf16_supported():
        gpu = torch.cuda.get_device_name(device)
        raise RuntimeError(f'fp16 dtype=bfloat16 was asked for, but {gpu} '
                           "cannot compute in bfloat16; use fp16=dict(loss_scale='dynamic') "
                           'for float16 or fp16=None')
    # An unsupported dtype makes torch.autocast warn and do nothing (or raise): make it an error.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        try:
            with torch.autocast(device.type, dtype=dtype):
                pass
        except RuntimeError as e:
            caught.append(e)
    problems = [str(getattr(w, 'message', w)) for w in caught
                if 'autocast' in str(getattr(w, 'message', w)).lower()]
    if problems:
        raise RuntimeError(f'fp16: autocast to {name} is not supported on {device.type} here '
                           f'({problems[0]}); choose the other dtype or set fp16=None')
