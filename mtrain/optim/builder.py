"""``build_optimizer(model, cfg)``: the ``optimizer`` config in, a torch optimizer out.

As in mmcv 1.x, the config names the optimizer and may carry two extra keys::

    optimizer = dict(type='AdamW', lr=1e-3, weight_decay=0.05,
                     constructor='DefaultOptimizerConstructor',   # the default
                     paramwise_cfg=dict(norm_decay_mult=0.))

A dict of such dicts (no ``type`` of its own) builds a dict of optimizers, one
per submodule of the same name, for a model whose ``train_step`` steps them
itself (GAN-style, as mmgen/mmedit's ``build_optimizers``)::

    optimizer = dict(generator=dict(type='Adam', lr=1e-4, betas=(0.5, 0.999)),
                     discriminator=dict(type='Adam', lr=4e-4, betas=(0.5, 0.999)))
    optimizer_config = None   # no OptimizerHook: the model steps both
"""

import copy
from typing import Any, Dict, Union

import torch
from torch import nn


from ..registry import OPTIMIZER_CONSTRUCTORS, build, registered_names
from ..utils.errors import ConfigError, did_you_mean
from .constructor import unwrap_model

DEFAULT_CONSTRUCTOR = 'DefaultOptimizerConstructor'


def build_optimizer_constructor(cfg: Dict[str, Any]) -> Any:
    """Build a constructor from ``OPTIMIZER_CONSTRUCTORS``.

    Args:
        cfg: ``dict(type=<constructor>, optimizer_cfg=..., paramwise_cfg=...)``.

    Raises:
        ConfigError: an unknown constructor name (the message names
            ``optimizer.constructor`` and the closest registered names).
    """
    if isinstance(cfg, dict) and isinstance(cfg.get('type'), str):
        cfg = dict(cfg, type=_constructor_class(cfg['type']))
    return build(cfg, OPTIMIZER_CONSTRUCTORS, key='optimizer')


def is_optimizers_dict(cfg: Any) -> bool:
    """Whether ``cfg`` describes a dict of optimizers: no ``type``, every value a dict."""
    return (isinstance(cfg, dict) and bool(cfg) and 'type' not in cfg
            and all(isinstance(v, dict) for v in cfg.values()))


def build_optimizers(model: nn.Module, cfgs: Dict[str, Any]) -> Union[
        torch.optim.Optimizer, Dict[str, torch.optim.Optimizer]]:
    """``{name: optimizer of model.<name>}`` for a dict of optimizer configs.

    A single optimizer config builds that one optimizer (mmgen's semantics).

    Raises:
        ConfigError: a name that is not a submodule of the model.
    """
    if not is_optimizers_dict(cfgs):
        return build_optimizer(model, cfgs)
    plain = unwrap_model(model)
    optimizers = {}
    for name, cfg in cfgs.items():
        module = getattr(plain, name, None)
        if not isinstance(module, nn.Module):
            children = [n for n, _ in plain.named_children()]
            raise ConfigError(f"a dict of optimizers names each for a submodule of the model, "
                              f"but {type(plain).__name__} has no submodule '{name}'."
                              f'{did_you_mean(name, children)} Submodules: {", ".join(children)}.',
                              key=f'optimizer.{name}')
        optimizers[name] = build_optimizer(module, cfg)
    return optimizers


def build_optimizer(model: nn.Module, cfg: Dict[str, Any]) -> torch.optim.Optimizer:
    """Build the optimizer described by ``cfg`` (the ``optimizer`` config) for ``model``.

    ``cfg`` is not modified: ``constructor`` (default ``'DefaultOptimizerConstructor'``)
    and ``paramwise_cfg`` are taken out of a deep copy, and the constructor gets the
    rest as ``optimizer_cfg``.

    The constructor is called with the user's model, not a wrapper around it
    (DataParallel, DDP, mtrain's ``ModelWrapper``), so a custom constructor may
    read the model's own attributes (``model.layers``) and parameter names.

    Args:
        model: the model, possibly wrapped (DataParallel, DDP).
        cfg: ``dict(type=..., lr=..., [constructor=...], [paramwise_cfg=...])``.

    A dict of optimizer configs builds a dict of optimizers (:func:`build_optimizers`).

    Raises:
        ConfigError: an unknown optimizer or constructor name, a bad argument or
            paramwise option; the message names the config key.
    """
    if is_optimizers_dict(cfg):
        return build_optimizers(model, cfg)
    if not isinstance(cfg, dict):
        raise ConfigError("the optimizer config must be a dict such as dict(type='SGD', "
                          f'lr=0.01), got {type(cfg).__name__}: {cfg!r}.', key='optimizer')
    optimizer_cfg = copy.deepcopy(dict(cfg))
    constructor = optimizer_cfg.pop('constructor', DEFAULT_CONSTRUCTOR)
    paramwise_cfg = optimizer_cfg.pop('paramwise_cfg', None)
    optim_constructor = build_optimizer_constructor(dict(
        type=constructor, optimizer_cfg=optimizer_cfg, paramwise_cfg=paramwise_cfg))
    return optim_constructor(unwrap_model(model))


def _constructor_class(constructor: str) -> Any:
    """The class named by ``optimizer.constructor``, with the closest names when unknown."""
    OPTIMIZER_CONSTRUCTORS.import_from_location()
    constructor_cls = OPTIMIZER_CONSTRUCTORS.get(constructor)
    if constructor_cls is None:
        names = registered_names(OPTIMIZER_CONSTRUCTORS)
        raise ConfigError(
            f"'{constructor}' is not a registered optimizer constructor."
            f'{did_you_mean(constructor, names)} Registered: {", ".join(sorted(names))}. '
            'Register your own with @OPTIMIZER_CONSTRUCTORS.register_module() and load its '
            "module with custom_imports=dict(imports=['your.module']).",
            key='optimizer.constructor')
    return constructor_cls
