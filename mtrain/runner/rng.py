"""Every RNG state a run depends on, as plain data (safe to load weights-only)."""

import random
from typing import Any, Dict

import numpy as np
import torch


def get_rng_state(devices: bool = True) -> Dict[str, Any]:
    """Python, numpy, torch CPU and (``devices``) CUDA RNG states as tensors/lists/numbers."""
    np_state = np.random.get_state()
    state = {
        'python': _to_lists(random.getstate()),
        'numpy': [np_state[0], np_state[1].tolist(), *np_state[2:]],
        'torch': torch.get_rng_state(),
    }
    if devices and torch.cuda.is_available() and torch.cuda.is_initialized():
        state['cuda'] = torch.cuda.get_rng_state_all()
    return state


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
