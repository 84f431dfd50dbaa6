"""Turn the mmcv 1.x hook config keys into (hook, priority) pairs.

``lr_config=dict(policy='step', ...)`` builds ``StepLrUpdaterHook`` (a policy
in lower case is title-cased, as mmcv 1.x does: ``'step'`` → ``'Step'``,
``'CosineAnnealing'`` stays), ``momentum_config`` likewise with
``MomentumUpdaterHook``, ``optimizer_config`` defaults to ``OptimizerHook``,
``checkpoint_config`` to ``CheckpointHook``, and each ``log_config.hooks``
entry gets ``interval`` from ``log_config``. Priorities follow mmcv 1.x.
"""

import copy
import inspect
from typing import Any, Dict, List, Tuple

from ..defaults import fill_runner_defaults
from ..hooks import Hook
from ..registry import HOOKS, build
from ..utils import get_priority
from ..utils.errors import ConfigError


def build_training_hooks(lr_config=None, optimizer_config=None, checkpoint_config=None,
                         log_config=None, momentum_config=None,
                         timer_config=dict(type='IterTimerHook'),
                         custom_hooks_config=None, profiler_config=None) -> List[Tuple[Hook, Any]]:
    """The standard hooks, in mmcv 1.x's registration order (profiler_config: ProfilerHook)."""
    hooks: List[Tuple[Hook, Any]] = []
    if lr_config is not None:
        hooks.append((_policy_hook(lr_config, 'LrUpdaterHook', 'lr_config'), 'VERY_HIGH'))
    if momentum_config is not None:
        hooks.append((_policy_hook(momentum_config, 'MomentumUpdaterHook', 'momentum_config'),
                      'HIGH'))
    if optimizer_config is not None:
        hooks.append((_hook(optimizer_config, 'OptimizerHook', 'optimizer_config'),
                      'ABOVE_NORMAL'))
    if checkpoint_config is not None:
        hooks.append((_hook(checkpoint_config, 'CheckpointHook', 'checkpoint_config'), 'NORMAL'))
    if timer_config is not None:
        hooks.append((_hook(timer_config, 'IterTimerHook', 'timer_config'), 'LOW'))
    if log_config is not None:
        hooks.extend((hook, 'VERY_LOW') for hook in _logger_hooks(log_config))
    hooks.extend(build_custom_hooks(custom_hooks_config))
    if profiler_config is not None:
        hooks.append((_hook(profiler_config, 'ProfilerHook', 'profiler_config'), None))
    return hooks


def with_runner_defaults(runner_type: Any, **configs: Any) -> Dict[str, Any]:
    """The hook configs with the runner type's ``by_epoch`` where not given.

    The defaults come from :mod:`mtrain.defaults` (the table the converter
    reads too): ``by_epoch=False`` under ``IterBasedRunner``, as mmcv 1.x's
    ``IterBasedRunner.register_training_hooks``. Hooks given as objects, and
    hook types without a ``by_epoch`` argument (``policy='Torch'``), are left
    as they are. Returns new dicts; the configs passed in are not changed.
    """
    return fill_runner_defaults(runner_type, configs, _config_takes_by_epoch)


def _config_takes_by_epoch(cfg: Dict[str, Any]) -> bool:
    policy = cfg.get('policy')
    if 'type' not in cfg and isinstance(policy, str):
        name = policy.title() if policy == policy.lower() else policy
        return any(_takes_by_epoch(name + suffix) for suffix in
                   ('LrUpdaterHook', 'MomentumUpdaterHook') if HOOKS.get(name + suffix))
    return _takes_by_epoch(cfg.get('type'))


def _takes_by_epoch(hook_type: Any) -> bool:
    """Whether the hook ``type`` has a ``by_epoch`` argument (None: a ``policy`` hook, which has)."""
    cls = HOOKS.get(hook_type) if isinstance(hook_type, str) else hook_type
    if cls is None:
        return True  # an unknown type: building it reports the error
    params = inspect.signature(cls.__init__).parameters
    return 'by_epoch' in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _hook(cfg: Any, default_type: str, key: str) -> Hook:
    if isinstance(cfg, Hook):
        return cfg
    cfg = dict(copy.deepcopy(cfg))
    cfg.setdefault('type', default_type)
    return build(cfg, HOOKS, key)


def _policy_hook(cfg: Any, suffix: str, key: str) -> Hook:
    if isinstance(cfg, Hook):
        return cfg
    cfg = dict(copy.deepcopy(cfg))
    if 'type' not in cfg:
        if 'policy' not in cfg:
            raise ConfigError(f"needs a `policy` (e.g. policy='step'), got keys {sorted(cfg)}",
                              key=key)
        policy = cfg.pop('policy')
        if not isinstance(policy, str):
            raise ConfigError(f'policy must be a string such as \'step\', got {policy!r}',
                              key=f'{key}.policy')
        if policy == policy.lower():
            policy = policy.title()
        cfg['type'] = policy + suffix
    try:
        return build(cfg, HOOKS, key)
    except ConfigError as e:
        if e.key == f'{key}.type':
            names = sorted(n[:-len(suffix)] for n in HOOKS.module_dict if n.endswith(suffix)
                           and n != suffix)
            raise ConfigError(f"unknown policy '{cfg['type'][:-len(suffix)]}'. "
                              f"Known policies: {', '.join(names)}.", key=f'{key}.policy') from e
        raise


def _logger_hooks(log_config: Dict[str, Any]) -> List[Hook]:
    interval = log_config.get('interval', 10)
    hooks = []
    for i, info in enumerate(log_config.get('hooks', [dict(type='TextLoggerHook')])):
        hooks.append(_hook_with_default(info, f'log_config.hooks.{i}', dict(interval=interval)))
    return hooks


def _hook_with_default(cfg: Dict[str, Any], key: str, default_args: Dict[str, Any]) -> Hook:
    return build(dict(copy.deepcopy(cfg)), HOOKS, key, default_args=default_args)


def build_custom_hooks(custom_hooks_config: Any) -> List[Tuple[Hook, Any]]:
    """``custom_hooks=[dict(type=..., priority=...)]`` (or one dict or hook, as in mmcv);
    ``priority`` is popped and honoured."""
    if isinstance(custom_hooks_config, (dict, Hook)):
        custom_hooks_config = [custom_hooks_config]
    hooks = []
    for i, item in enumerate(custom_hooks_config or []):
        if isinstance(item, Hook):
            hooks.append((item, None))
            continue
        if not isinstance(item, dict):
            raise ConfigError(f'each custom hook must be a dict with a type, got {item!r}',
                              key=f'custom_hooks.{i}')
        item = dict(copy.deepcopy(item))
        priority = item.pop('priority', None)
        if priority is not None:
            try:
                get_priority(priority)
            except (TypeError, ValueError) as e:
                raise ConfigError(str(e), key=f'custom_hooks.{i}.priority') from e
        hooks.append((build(item, HOOKS, f'custom_hooks.{i}'), priority))
    return hooks
