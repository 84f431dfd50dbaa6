"""Search spaces: a small Python file mapping config keys to distributions.

A SPACE file is read like a config; the distribution functions are already defined
in it (``from mtrain.sweep import loguniform`` works too)::

    # configs/digits/lr_space.py
    space = {
        'optimizer.lr': loguniform(1e-3, 0.5),
        'optimizer.weight_decay': [0, 1e-4, 5e-4],          # a list: one of these values
        'lr_config.warmup_iters': intrange(0, 40, step=10),
    }
    # or nested, as a config is written: optimizer = dict(momentum=uniform(0.8, 0.99))

Each key is a dotted config key (list items by index, ``custom_hooks.0.priority``),
as ``--cfg-options`` takes it. :func:`load_space` reads the file;
:mod:`mtrain.sweep.space_check` checks it against the config.
"""

import math
import os.path as osp
import re
import runpy
import traceback
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from ..utils import ConfigError
from ..utils.errors import did_you_mean

#: Values a choice may hold (what Optuna stores for a categorical parameter).
CHOICE_TYPES = (type(None), bool, int, float, str)


@dataclass(frozen=True)
class Distribution:
    """One key's range: ``kind`` is ``'float'``, ``'int'`` or ``'choice'``."""
    kind: str
    low: Any = None
    high: Any = None
    step: Any = None
    log: bool = False
    choices: Tuple[Any, ...] = ()

    def corners(self) -> Tuple[Any, ...]:
        """The values a check tries: both ends of a range, every choice."""
        return self.choices if self.kind == 'choice' else (self.low, self.high)

    def describe(self) -> str:
        if self.kind == 'choice':
            return f'one of {list(self.choices)}'
        name = ('loguniform' if self.log else 'uniform') if self.kind == 'float' else 'intrange'
        shown = self.step is not None and (self.kind == 'float' or self.step != 1)
        step = f', step={self.step}' if shown else ''
        return f'{name}({self.low}, {self.high}{step})'

    def to_optuna(self) -> Any:
        """The Optuna distribution (imported here: Optuna is an optional extra)."""
        from optuna import distributions as d  # noqa: PLC0415  (optional dependency)
        if self.kind == 'choice':
            return d.CategoricalDistribution(self.choices)
        if self.kind == 'int':
            return d.IntDistribution(self.low, self.high, log=self.log, step=self.step)
        return d.FloatDistribution(self.low, self.high, log=self.log, step=self.step)


def loguniform(low: float, high: float) -> Distribution:
    """A float between ``low`` and ``high`` (both > 0), uniform in its logarithm."""
    _check_range('loguniform', low, high, (int, float))
    if low <= 0:
        raise ValueError(f'loguniform({low}, {high}): low must be > 0')
    return Distribution('float', float(low), float(high), log=True)


def uniform(low: float, high: float, step: Optional[float] = None) -> Distribution:
    """A float between ``low`` and ``high``; on a grid of ``step`` from ``low`` when given."""
    _check_range('uniform', low, high, (int, float))
    if step is not None and not (isinstance(step, (int, float)) and step > 0):
        raise ValueError(f'uniform({low}, {high}, step={step!r}): step must be > 0')
    return Distribution('float', float(low), float(high), step=step)


def intrange(low: int, high: int, step: int = 1, log: bool = False) -> Distribution:
    """An integer from ``low`` to ``high``, both included, every ``step``."""
    _check_range('intrange', low, high, (int, ))
    if not (isinstance(step, int) and step >= 1):
        raise ValueError(f'intrange({low}, {high}, step={step!r}): step must be an integer >= 1')
    if (high - low) % step:
        raise ValueError(f'intrange({low}, {high}, step={step}): high - low must be a multiple '
                         f'of step (e.g. intrange({low}, {low + (high - low) // step * step}, '
                         f'step={step}))')
    if log and (low < 1 or step != 1):
        raise ValueError(f'intrange({low}, {high}, log=True) needs low >= 1 and step=1')
    return Distribution('int', low, high, step=step, log=log)


def choice(*values: Any) -> Distribution:
    """One of ``values`` (a plain list in a SPACE file means the same)."""
    if len(values) == 1 and isinstance(values[0], (list, tuple)):
        values = tuple(values[0])
    if not values:
        raise ValueError('choice() needs at least one value')
    bad = [v for v in values if not isinstance(v, CHOICE_TYPES)]
    if bad:
        raise ValueError(f'choice values must be None, bool, int, float or str, got {bad[0]!r}; '
                         'search over the items of a list or dict by their own keys instead')
    if len(set(map(repr, values))) != len(values):
        raise ValueError(f'choice values repeat: {list(values)}')
    return Distribution('choice', choices=tuple(values))


def _check_range(name: str, low: Any, high: Any, types: tuple) -> None:
    for v in (low, high):
        if isinstance(v, bool) or not isinstance(v, types) or not math.isfinite(v):
            kind = 'integers' if types == (int, ) else 'finite numbers'
            raise ValueError(f'{name}({low!r}, {high!r}): low and high must be {kind}')
    if low >= high:
        raise ValueError(f'{name}({low}, {high}): low must be smaller than high')


#: The names a SPACE file can use without importing them.
FUNCTIONS = {'loguniform': loguniform, 'uniform': uniform, 'intrange': intrange,
             'choice': choice}


def load_space(path: str) -> Dict[str, Distribution]:
    """Read a SPACE file into ``{dotted key: Distribution}``, in the file's order.

    Raises:
        ConfigError: a missing file, a syntax or name error, a bad distribution,
            or an entry that is not a distribution or a list of choices.
    """
    if not osp.isfile(path):
        raise ConfigError(f'search space file {path} does not exist; check --space',
                          filename=path)
    names = _run_space_file(path)
    entries = {k: v for k, v in names.items()
               if not k.startswith('_') and k not in FUNCTIONS and _is_space_value(v)}
    space: Dict[str, Distribution] = {}
    for key, value in _flatten(entries.pop('space', {}), '') + _flatten(entries, ''):
        space[key] = _as_distribution(value, key, path)
    if not space:
        raise ConfigError("the search space is empty; write e.g. space = {'optimizer.lr': "
                          'loguniform(1e-3, 1e-1)}', filename=path)
    return space


def _run_space_file(path: str) -> Dict[str, Any]:
    """The SPACE file's top-level names; any exception it raises is one :class:`ConfigError`
    naming the file, the line and the fix (a user's mistake, never a traceback)."""
    try:
        return runpy.run_path(path, init_globals=dict(FUNCTIONS))
    except SyntaxError as e:
        raise ConfigError(f'Python syntax error at line {e.lineno}: {e.msg}',
                          filename=path) from None
    except NameError as e:
        raise ConfigError(f'{e}.{did_you_mean(e.name or "", FUNCTIONS)} A SPACE file can use '
                          f"{', '.join(FUNCTIONS)} and lists of values", filename=path) from e
    except (ValueError, TypeError) as e:
        raise ConfigError(str(e), filename=path) from e
    except ImportError as e:
        missing = re.match(r"cannot import name '(\w+)'", str(e))
        hint = did_you_mean(missing.group(1), FUNCTIONS) if missing else ''
        raise ConfigError(f'line {_line_in(e, path)}: {_first_line(e)}.{hint} The '
                          f"distributions ({', '.join(FUNCTIONS)}) are defined in a SPACE file "
                          'already: no import is needed, or import them from mtrain.sweep',
                          filename=path) from e
    except Exception as e:  # noqa: BLE001  (whatever the file's code raises)
        raise ConfigError(f'line {_line_in(e, path)}: {type(e).__name__}: {_first_line(e)}. A '
                          'SPACE file is Python run once to build `space`; fix that line',
                          filename=path) from e


def _first_line(error: BaseException) -> str:
    return (str(error).splitlines() or [''])[0]


def _line_in(error: BaseException, path: str) -> Any:
    """The line of ``path`` that raised ``error`` (its last frame in that file), or '?'."""
    lines = [f.lineno for f in traceback.extract_tb(error.__traceback__)
             if osp.abspath(f.filename) == osp.abspath(path)]
    return lines[-1] if lines else '?'


def _is_space_value(value: Any) -> bool:
    return isinstance(value, (dict, list, tuple, Distribution))


def _flatten(node: Dict[str, Any], prefix: str) -> list:
    """``{'optimizer': {'lr': d}}`` and ``{'optimizer.lr': d}`` → ``[('optimizer.lr', d)]``."""
    items = []
    for key, value in node.items():
        path = f'{prefix}{key}'
        items += _flatten(value, path + '.') if isinstance(value, dict) else [(path, value)]
    return items


def _as_distribution(value: Any, key: str, path: str) -> Distribution:
    if isinstance(value, Distribution):
        return value
    if isinstance(value, (list, tuple)):
        try:
            return choice(*value)
        except ValueError as e:
            raise ConfigError(str(e), key=key, filename=path) from e
    raise ConfigError(f'{value!r} is not a distribution; write loguniform(a, b), uniform(a, b), '
                      'intrange(a, b) or a list of values', key=key, filename=path)
