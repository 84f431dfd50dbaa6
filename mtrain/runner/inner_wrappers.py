"""Weights named without the model wrappers *inside* a model, as mmcv 1.7.2 names them.

mmcv's runners save ``get_state_dict(model)``, which leaves out a wrapper at any
depth, and its ``load_state_dict`` unwraps every depth too: mmgen and mmedit wrap
the generator and the discriminator each in its own DDP, so the file says
``generator.conv.weight`` where the wrapped model says
``generator.module.conv.weight``. The two functions here rename between the two.
"""

from collections import OrderedDict
from typing import Any, Dict, Iterator, List, Tuple

from torch import nn

from ..parallel import is_module_wrapper


def out_of_inner_wrappers(state_dict: Dict[str, Any], module: nn.Module) -> Dict[str, Any]:
    """``module.state_dict()`` with the inner wrappers' names taken out (what mmcv saves).

    Renames rather than re-collects, so that the modules' state_dict hooks
    (activation checkpointing's) still apply.
    """
    pairs = [(real, clean) for clean, real in _inner_prefixes(module)]
    return _renamed(state_dict, pairs, own={}) if pairs else state_dict


def into_inner_wrappers(state_dict: Dict[str, Any], module: nn.Module,
                        own: Dict[str, Any]) -> Dict[str, Any]:
    """``state_dict`` with its wrapper-free names put back under ``module``'s inner wrappers.

    A key the model already has (``own``: a file written with the wrappers'
    names) is kept as it is.
    """
    pairs = list(_inner_prefixes(module))
    return _renamed(state_dict, pairs, own) if pairs else state_dict


def _inner_prefixes(module: nn.Module) -> Iterator[Tuple[str, str]]:
    """``(prefix without wrappers, prefix in module.state_dict())`` where they differ, deepest first."""
    pairs = [(clean, real) for clean, real in _prefixes(module) if clean != real]
    return iter(sorted(pairs, key=lambda pair: -len(pair[0])))


def _prefixes(module: nn.Module, clean: str = '', real: str = '') -> Iterator[Tuple[str, str]]:
    while is_module_wrapper(module):
        module, real = module.module, f'{real}module.'
    yield clean, real
    for name, child in module._modules.items():
        if child is not None:
            yield from _prefixes(child, f'{clean}{name}.', f'{real}{name}.')


def _renamed(state_dict: Dict[str, Any], prefixes: List[Tuple[str, str]],
             own: Dict[str, Any]) -> OrderedDict:
    """Each key (and ``_metadata`` entry) not in ``own``: its first ``(old, new)`` prefix replaced."""
    def rename(key: str) -> str:
        for old, new in prefixes:
            if key.startswith(old) and key not in own:
                return new + key[len(old):]
        return key

    renamed = OrderedDict((rename(k), v) for k, v in state_dict.items())
    renamed._metadata = OrderedDict((rename(k + '.')[:-1], v) for k, v in
                                    getattr(state_dict, '_metadata', {}).items())
    return renamed
