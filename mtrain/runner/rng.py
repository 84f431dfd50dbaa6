"""Every RNG state a run depends on, as plain data (safe to load weights-only)."""

import random
from typing import Any, Dict

import numpy as np
import torch


def get_rng_state(devices: bool = True) -> Dict[str, Any]:
    """Python, numpy, torch CPU and (``devices``) CUDA RNG states as tensors/lists/numbers."""
    state = plain_rng_state(capture_rng_state())
    if devices and torch.cuda.is_available() and torch.cuda.is_initialized():
        state['cuda'] = torch.cuda.get_rng_state_all()
    return state


def capture_rng_state() -> Dict[str, Any]:
    """The CPU RNG states as their libraries return them (fresh copies, a third of the cost).

    :func:`set_rng_state` takes this as it is; :func:`plain_rng_state` turns
    it into what a checkpoint may hold.
    """
    return {'python': random.getstate(), 'numpy': np.random.get_state(),
            'torch': torch.get_rng_state()}


def plain_rng_state(state: Dict[str, Any]) -> Dict[str, Any]:
    """``state`` with tuples and arrays as lists (safe to load weights-only); plain: as it is.

    The libraries ``state`` leaves out stay out (a pass start notes torch's alone
    where nothing else draws, see :func:`~.data_pass.pass_start`).
    """
    plain = dict(state)
    if 'python' in state:
        plain['python'] = _to_lists(state['python'])
    if 'numpy' in state:
        name, keys, *rest = state['numpy']
        plain['numpy'] = [name, keys.tolist() if hasattr(keys, 'tolist') else keys, *rest]
    return plain


def set_rng_state(state: Dict[str, Any]) -> None:
    """Restore what :func:`get_rng_state` returned."""
    if 'python' in state:
        version, internal, gauss = state['python']
        random.setstate((version, tuple(internal), gauss))
    if 'numpy' in state:
        name, keys, *rest = state['numpy']
        np.random.set_state((name, np.asarray(keys, dtype=np.uint32), *rest))
    if 'torch' in state:
        torch.set_rng_state(state['torch'])
    if 'cuda' in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state['cuda'])


def _to_lists(obj: Any) -> Any:
    if isinstance(obj, tuple):
        return [_to_lists(x) for x in obj]
    return obj
