"""Data pipelines: a list of ``TRANSFORMS`` configs applied in order.

Config::

    pipeline = [
        dict(type='RandomResizedCrop', size=224),
        dict(type='RandomHorizontalFlip'),
        dict(type='ToImage'),
        dict(type='ToDtype', dtype='float32', scale=True),
        dict(type='Normalize', mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ]
"""

from typing import Any, Callable, Dict, List, Sequence

import torch

from ..registry import TRANSFORMS, build
from ..utils import ConfigError, closest_names


class Compose:
    """Apply ``steps`` one after another; a step that fails is named in the error.

    Args:
        steps: built transforms (callables of one argument).
        names: a label per step for messages, e.g. ``'pipeline.2 (ToDtype)'``.
    """

    def __init__(self, steps: Sequence[Callable], names: Sequence[str]) -> None:
        assert len(steps) == len(names), '[Compose] one name per step'
        self.steps = list(steps)
        self.names = list(names)

    def __call__(self, data: Any) -> Any:
        for step, name in zip(self.steps, self.names):
            try:
                data = step(data)
            except Exception as e:
                e.add_note(f'(raised by the data pipeline step {name})')
                raise
        return data

    def __len__(self) -> int:
        return len(self.steps)

    def __repr__(self) -> str:
        inner = ''.join(f'\n    {step!r},' for step in self.steps)
        return f'Compose([{inner}\n])'


def build_pipeline(steps_cfg: Sequence[Dict[str, Any]], key: str = 'pipeline') -> Compose:
    """Build every step of ``steps_cfg`` from ``TRANSFORMS``.

    Raises:
        ConfigError: naming the failing step's key path (``pipeline.2``) and type.
    """
    if isinstance(steps_cfg, dict) or not isinstance(steps_cfg, (list, tuple)):
        raise ConfigError('a pipeline is a list of transform dicts, e.g. '
                          "[dict(type='ToImage'), dict(type='ToDtype', dtype='float32', "
                          f'scale=True)], got {type(steps_cfg).__name__}', key=key)
    steps: List[Callable] = []
    names: List[str] = []
    for i, step_cfg in enumerate(steps_cfg):
        step_key = f'{key}.{i}'
        kind = step_cfg.get('type', '?') if isinstance(step_cfg, dict) else '?'
        try:
            steps.append(build(step_cfg, TRANSFORMS, step_key))
        except ConfigError as e:
            raise ConfigError(f'{key.rsplit(".", 1)[-1]} step {i} ({kind}): {e.message}',
                              key=e.key or step_key) from e
        names.append(f'{step_key} ({getattr(kind, "__name__", kind)})')
    return Compose(steps, names)


def to_dtype(value: Any, key: str) -> Any:
    """``'float32'``/``'torch.uint8'`` → the ``torch.dtype``; dtypes and None pass through.

    A dict (``ToDtype``'s per-type form) has its values converted.
    """
    if isinstance(value, dict):
        return {k: to_dtype(v, f'{key}.{k}') for k, v in value.items()}
    if value is None or isinstance(value, torch.dtype):
        return value
    name = str(value).removeprefix('torch.')
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        known = [n for n in dir(torch) if isinstance(getattr(torch, n, None), torch.dtype)]
        hint = closest_names(name, known)
        raise ConfigError(f"'{value}' is not a torch dtype"
                          + (f"; did you mean '{hint[0]}'?" if hint else '; use e.g. '
                             "'float32', 'float16', 'bfloat16' or 'uint8'."), key=key)
    return dtype
