"""Check a search space against the config before any trial runs.

Every mistake is one :class:`ConfigError` naming the SPACE file and the key:

* a key the config does not have (with the closest keys it does have);
* a value of the wrong kind (a float range for an integer count, a string for a number,
  a range over a list or a dict);
* a value outside what the key can take (a negative ``lr``, a ``momentum`` above 1);
* a value the config checks or the optimizer reject: each end of every range and each
  choice is applied as ``--cfg-options`` would apply it, and ``optimizer.*`` values
  build the optimizer on a one-layer model;
* a value that would not survive the trial's command line unchanged.
"""

import logging
import math
from contextlib import contextmanager
from typing import Any, Dict, Iterator, Optional, Tuple

import torch

from ..config import load_config, parse_cfg_options
from ..optim import build_optimizer
from ..utils import ConfigError
from ..utils.errors import did_you_mean
from .space import Distribution

#: Config keys (by their last part) that count things: they take integers only.
COUNT_SUFFIXES = ('_iters', '_epochs', 'interval', '_per_gpu', 'num_classes', '_steps',
                  'max_keep_ckpts', 'width', 'depth', 'channels')

#: Known bounds by last key part: (low, high, low included, high included).
BOUNDS = {
    'lr': (0, math.inf, False, False), 'min_lr': (0, math.inf, True, False),
    'weight_decay': (0, math.inf, True, False), 'momentum': (0, 1, True, True),
    'warmup_ratio': (0, 1, False, True), 'warmup_iters': (0, math.inf, True, False),
    'max_epochs': (1, math.inf, True, False), 'max_iters': (1, math.inf, True, False),
    'samples_per_gpu': (1, math.inf, True, False), 'workers_per_gpu': (0, math.inf, True, False),
    'eps': (0, math.inf, False, False), 'label_smoothing': (0, 1, True, False),
    'gamma': (0, math.inf, False, False),
}


def check_space(space: Dict[str, Distribution], config: str, space_file: str,
                fixed: Optional[Dict[str, Any]] = None) -> None:
    """Raise :class:`ConfigError` on the first entry of ``space`` that ``config`` cannot take.

    ``fixed``: the ``--cfg-options`` every trial gets, applied first.
    """
    fixed = dict(fixed or {})
    cfg = load_config(config, fixed)
    keys = dict(config_keys(cfg.to_dict()))
    for key, dist in space.items():
        def fail(message: str) -> ConfigError:
            return ConfigError(message, key=key, filename=space_file)
        if key not in keys:
            level = [k for k in keys if k.count('.') == key.count('.')]
            raise fail(f'the config {config} has no key {key!r}.'
                       f'{did_you_mean(key, level) or did_you_mean(key, keys)}')
        _check_kind(key, dist, keys[key], fail)
        _check_bounds(key, dist, fail)
        for value in dist.corners():
            _check_applies(config, fixed, key, value, fail)


def config_keys(node: Any, prefix: str = '') -> Iterator[Tuple[str, Any]]:
    """Every dotted key of a config dict and its value (list items by index)."""
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for name, value in items:
        key = f'{prefix}{name}'
        yield key, value
        if isinstance(value, (dict, list, tuple)):
            yield from config_keys(value, key + '.')


def _check_kind(key: str, dist: Distribution, current: Any, fail) -> None:
    """The distribution's values are of the kind the config's value is."""
    now = f'(the config has {current!r})'
    if isinstance(current, (dict, list, tuple)):
        raise fail(f'is a {type(current).__name__} {now}; search over its items by their own '
                   f"keys, e.g. '{key}.{next(iter(dict(config_keys(current))), 0)}'")
    values = dist.corners()
    if isinstance(current, bool):
        ok = all(isinstance(v, bool) for v in values)
        expected = 'True or False'
    elif isinstance(current, str):
        ok = all(isinstance(v, (str, type(None))) for v in values)
        expected = 'a string'
    elif isinstance(current, (int, float)):
        ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        expected = 'a number'
        if ok and key.endswith(COUNT_SUFFIXES) and (
                dist.kind == 'float' or any(isinstance(v, float) for v in values)):
            ok, expected = False, 'an integer: use intrange(low, high) or a list of integers'
    else:  # None: the config leaves it open
        return
    if not ok:
        raise fail(f'takes {expected} {now}, but the space gives {dist.describe()}')


def _check_bounds(key: str, dist: Distribution, fail) -> None:
    bound = BOUNDS.get(key.rsplit('.', 1)[-1])
    if bound is None:
        return
    low, high, low_in, high_in = bound
    for v in dist.corners():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and not (
                (v > low or low_in and v == low) and (v < high or high_in and v == high)):
            span = f"{'[' if low_in else '('}{low}, {high}{']' if high_in else ')'}"
            raise fail(f'must lie in {span}, but the space gives {dist.describe()}')


def _check_applies(config: str, fixed: Dict[str, Any], key: str, value: Any, fail) -> None:
    """``value`` goes through the command line unchanged and the config (and optimizer) take it."""
    text = format_override(key, value)
    try:
        parsed = parse_cfg_options([text])[key]
    except ConfigError as e:
        raise fail(f'the value {value!r} cannot be passed as --cfg-options ({e.message})') from e
    if type(parsed) is not type(value) or parsed != value:
        raise fail(f'the value {value!r} would reach the trial as {parsed!r} through '
                   '--cfg-options; choose values that read back the same')
    try:
        cfg = load_config(config, {**fixed, key: value})
    except ConfigError as e:
        raise fail(f'the config does not take {value!r}: {e.message}') from e
    if key.startswith('optimizer.'):
        _check_optimizer(load_config(config, fixed).optimizer, value, cfg.optimizer, fail)


def _check_optimizer(base_cfg: Any, value: Any, optimizer_cfg: Any, fail) -> None:
    """Build the optimizer with ``value`` on a one-layer model (if the config's own builds)."""
    probe = torch.nn.Linear(2, 2)
    with _quiet_optimizer_log():  # the probe's summary line would describe the probe
        try:
            build_optimizer(probe, base_cfg)
        except Exception:  # noqa: BLE001  (paramwise_cfg naming the real model's layers, ...)
            return  # the probe cannot tell; the trial's own build will
        try:
            build_optimizer(probe, optimizer_cfg)
        except (ValueError, TypeError, ConfigError) as e:
            raise fail(f"the optimizer does not take {value!r}: "
                       f"{getattr(e, 'message', e)}") from e


@contextmanager
def _quiet_optimizer_log() -> Iterator[None]:
    """Hold back the optimizer builder's info and warning lines while it builds the probe."""
    log = logging.getLogger('mtrain.optim')
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def format_override(key: str, value: Any) -> str:
    """``key=value`` as ``--cfg-options`` reads it back (floats exactly: ``repr``)."""
    return f'{key}={value!r}' if isinstance(value, float) else f'{key}={value}'
