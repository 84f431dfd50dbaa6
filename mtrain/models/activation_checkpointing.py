"""Activation checkpointing of chosen submodules, from the config, without editing the model.

Config::

    activation_checkpointing = dict(modules=['backbone.layer3', 'TransformerBlock'])

Each entry is a module path (``model.get_submodule``'s dotted name) or a class
name (every module of that class). A chosen module keeps no activations of
its own forward: the forward runs again, inside the backward, through
``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)``, trading that
compute for memory. The module is not wrapped: its ``forward`` is replaced on
the instance, so parameter names, checkpoint keys, the optimizer's parameters
and FSDP2's / DDP's view of the model stay those of the plain model.
"""

import contextlib
import types
from typing import Any, Dict, Iterator, List, Optional

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..utils import ConfigError
from ..utils.errors import did_you_mean

_KEY = 'activation_checkpointing'


def apply_activation_checkpointing(model: nn.Module, cfg: Optional[Dict[str, Any]],
                                   logger=None) -> List[str]:
    """Checkpoint the modules ``cfg['modules']`` names; return their paths (none for None).

    Call it on the plain model, before DDP/FSDP wrap it (the builder does). A
    module inside another chosen one is left alone: the outer recomputation
    already covers it.

    Raises:
        ConfigError: ``cfg`` is not ``dict(modules=[...])``, or an entry names no
            module path and no class of the model (the message gives the closest names).
    """
    if cfg is None:
        return []
    names = _entries(cfg)
    chosen = _resolve(model, names)
    done: List[str] = []
    for path, module in model.named_modules():
        if path in chosen and not any(path.startswith(outer + '.') for outer in done):
            module.forward = types.MethodType(_checkpointed_forward, module)
            done.append(path)
    if logger is not None:
        logger.info(f'activation checkpointing: {len(done)} modules recompute their forward '
                    f'in the backward ({", ".join(done[:6])}{", ..." if len(done) > 6 else ""})')
    return done


def _checkpointed_forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
    """The class's forward, run under non-reentrant checkpointing (RNG state kept for dropout).

    Non-reentrant: works with keyword arguments, inputs that need no gradient,
    DDP, FSDP2 and autocast (the recomputation runs under the forward's autocast
    state). The recomputation puts the BatchNorm running statistics back as
    they were: without that, each batch would update them twice.
    """
    calls = []

    def run(*args: Any, **kwargs: Any) -> Any:
        calls.append(None)
        if len(calls) == 1:
            return type(self).forward(self, *args, **kwargs)
        with _running_stats_kept(self):
            return type(self).forward(self, *args, **kwargs)

    return checkpoint(run, *args, use_reentrant=False, **kwargs)


@contextlib.contextmanager
def _running_stats_kept(module: nn.Module) -> Iterator[None]:
    """Restore every BatchNorm's running statistics on the way out (even an early stop)."""
    saved = [(buf, buf.clone()) for m in module.modules()
             if isinstance(m, nn.modules.batchnorm._NormBase) and m.training
             for buf in (m.running_mean, m.running_var, m.num_batches_tracked)
             if buf is not None]
    try:
        yield
    finally:
        with torch.no_grad():
            for buf, value in saved:
                buf.copy_(value)


def _entries(cfg: Any) -> List[str]:
    if not isinstance(cfg, dict) or set(cfg) != {'modules'}:
        found = sorted(cfg) if isinstance(cfg, dict) else repr(cfg)
        raise ConfigError(f"{_KEY} must be dict(modules=[...]) listing module paths or class "
                          f"names, e.g. dict(modules=['backbone.layer3', 'TransformerBlock']), "
                          f'or None; got {found}', key=_KEY)
    names = cfg['modules']
    if isinstance(names, str):
        names = [names]
    if not names or not all(isinstance(n, str) for n in names):
        raise ConfigError(f'{_KEY}.modules must be a non-empty list of module paths or class '
                          f'names; got {names!r}', key=f'{_KEY}.modules')
    return list(names)


def _resolve(model: nn.Module, names: List[str]) -> set:
    """The paths of the modules ``names`` choose (the root model is path '')."""
    paths = {path: type(module).__name__ for path, module in model.named_modules()}
    chosen = set()
    for i, name in enumerate(names):
        hits = {path for path, cls in paths.items() if path == name or cls == name}
        if not hits:
            candidates = [p for p in paths if p] + sorted(set(paths.values()))
            raise ConfigError(f"'{name}' is neither a module path nor a class name of the "
                              f'model.{did_you_mean(name, candidates)}', key=f'{_KEY}.modules.{i}')
        chosen |= hits
    return chosen
