"""The arithmetic of the LR and momentum schedules, as pure functions.

Every formula keeps mmcv 1.7.2's order of floating-point operations, so a
schedule built on these gives mmcv's numbers bit for bit (the golden tests in
``tests/hooks`` compare against sequences produced by mmcv itself).
"""

import math
import numbers
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ...utils.errors import AssertedValueError

WARMUP_TYPES = ('constant', 'linear', 'exp')

AnnealFunc = Callable[[float, float, float], float]


def annealing_cos(start: float, end: float, factor: float, weight: float = 1.) -> float:
    """Cosine from ``weight * start + (1 - weight) * end`` (factor 0) down to ``end`` (factor 1).

    Args:
        start: the value at the start of the cycle (before ``weight``).
        end: the value at the end.
        factor: how far through the cycle, 0.0 to 1.0.
        weight: scales the cycle's amplitude (restart weights). Default: 1.
    """
    cos_out = math.cos(math.pi * factor) + 1
    return end + 0.5 * weight * (start - end) * cos_out


def annealing_linear(start: float, end: float, factor: float) -> float:
    """Straight line from ``start`` (factor 0) to ``end`` (factor 1)."""
    return start + (end - start) * factor


_ANNEAL = {'cos': annealing_cos, 'linear': annealing_linear}


def anneal_func(strategy: str, owner: str) -> AnnealFunc:
    """The function for ``anneal_strategy`` ``'cos'`` or ``'linear'``.

    Raises:
        ValueError: any other strategy; the message names ``owner``.
    """
    if strategy not in _ANNEAL:
        raise ValueError(f"{owner}: anneal_strategy must be 'cos' or 'linear', "
                         f'got {strategy!r}.')
    return _ANNEAL[strategy]


def warmup_factor(warmup: str, cur: float, warmup_iters: float, ratio: float) -> float:
    """What the scheduled value is multiplied by during warmup (``ratio`` → 1).

    Args:
        warmup: ``'constant'`` (``ratio`` throughout), ``'linear'`` or ``'exp'``.
        cur: iterations done so far (``cur < warmup_iters``).
        warmup_iters: the warmup's length in iterations.
        ratio: the factor at ``cur == 0``, in (0, 1].
    """
    if warmup == 'constant':
        return ratio
    if warmup == 'linear':
        k = (1 - cur / warmup_iters) * (1 - ratio)
        return 1 - k
    return ratio**(1 - cur / warmup_iters)


def check_warmup(owner: str, warmup: Optional[str], warmup_iters: float,
                 warmup_ratio: float) -> None:
    """Reject a warmup config that cannot work, with a sentence that says why."""
    if warmup is None:
        return
    if warmup not in WARMUP_TYPES:
        raise ValueError(f"{owner}: warmup must be 'constant', 'linear', 'exp' or None "
                         f'(no warmup), got {warmup!r}.')
    if not isinstance(warmup_iters, numbers.Real) or warmup_iters <= 0:
        raise AssertedValueError(f'{owner}: warmup_iters must be a positive number when warmup is '
                         f"set, got {warmup_iters!r}. Set warmup=None for no warmup.")
    if not isinstance(warmup_ratio, numbers.Real) or not 0 < warmup_ratio <= 1:
        raise AssertedValueError(f'{owner}: warmup_ratio must be in (0, 1] (warmup starts at '
                         f'warmup_ratio times the scheduled value), got {warmup_ratio!r}.')


def check_min_or_ratio(owner: str, name: str, value: Optional[float],
                       ratio: Optional[float]) -> None:
    """Exactly one of ``min_<name>`` and ``min_<name>_ratio`` must be given."""
    if (value is None) == (ratio is None):
        found = 'both' if value is not None else 'neither'
        raise AssertedValueError(f'{owner} needs exactly one of min_{name} (an absolute {name}) and '
                         f'min_{name}_ratio (a fraction of the initial {name}), got {found}.')


def target_value(base: float, value: Optional[float], ratio: Optional[float]) -> float:
    """The end of an annealing: ``base * ratio`` when a ratio is given, else ``value``."""
    return base * ratio if ratio is not None else value


def check_steps(owner: str, step: Union[int, Sequence[int]]) -> Union[int, List[int]]:
    """``step`` as a positive int (an interval) or a list of positive ints (milestones)."""
    if isinstance(step, (list, tuple)):
        if not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in step):
            raise AssertedValueError(f'{owner}: every entry of step must be a positive integer, '
                             f'got {list(step)!r}.')
        return list(step)
    if isinstance(step, int) and not isinstance(step, bool):
        if step <= 0:
            raise AssertedValueError(f'{owner}: step must be a positive integer, got {step}.')
        return step
    raise TypeError(f'{owner}: step must be an int (decay every `step`) or a list of ints '
                    f'(decay at each), got {type(step).__name__}.')


def step_exponent(progress: int, step: Union[int, List[int]]) -> int:
    """How many decays have happened by ``progress``: every ``step``, or at each milestone."""
    if isinstance(step, int):
        return progress // step
    for i, milestone in enumerate(step):
        if progress < milestone:
            return i
    return len(step)


def position_in_periods(progress: int, cumulative_periods: List[int]) -> int:
    """The index of the first cumulative period that ``progress`` has not reached.

    ``cumulative_periods=[100, 200, 300]``: progress 50 → 0, 210 → 2, 200 → 2.

    Raises:
        ValueError: ``progress`` is past the last period.
    """
    for i, period in enumerate(cumulative_periods):
        if progress < period:
            return i
    raise ValueError(f'CosineRestartLrUpdaterHook: progress {progress} is past the end of the '
                     f'periods (cumulative {cumulative_periods}). Make the periods add up to '
                     'at least the run length.')


def normalize_target_ratio(owner: str, target_ratio: Any) -> Tuple[float, float]:
    """``r`` or ``(r,)`` → ``(r, r / 1e5)``; a pair is kept (mmcv's cyclic convention)."""
    if isinstance(target_ratio, numbers.Real) and not isinstance(target_ratio, bool):
        return (target_ratio, target_ratio / 1e5)
    if isinstance(target_ratio, (tuple, list)) and len(target_ratio) in (1, 2):
        if len(target_ratio) == 1:
            return (target_ratio[0], target_ratio[0] / 1e5)
        return (target_ratio[0], target_ratio[1])
    raise AssertedValueError(f'{owner}: target_ratio must be a number or a tuple of one or two '
                     f'numbers, got {target_ratio!r}.')


def cyclic_phases(owner: str, max_iters: int, cyclic_times: int, step_ratio_up: float,
                  target_ratio: Tuple[float, float]) -> Tuple[int, List[list]]:
    """Length of one cycle and its rising and falling phases ``[start, end, from, to]``."""
    per_cycle = max_iters // cyclic_times
    if per_cycle < 1:
        raise ValueError(f'{owner}: cyclic_times={cyclic_times} is more than the run has '
                         f'iterations ({max_iters}); lower cyclic_times.')
    up = int(step_ratio_up * per_cycle)
    return per_cycle, [[0, up, 1, target_ratio[0]],
                       [up, per_cycle, target_ratio[0], target_ratio[1]]]


def cyclic_value(base: float, update: int, per_cycle: int, phases: List[list], gamma: float,
                 anneal: AnnealFunc) -> float:
    """The value at ``update`` of a cyclic schedule whose amplitude shrinks by ``gamma`` a cycle."""
    curr = update % per_cycle
    scale = gamma**(update // per_cycle)
    for start, end, start_ratio, end_ratio in phases:
        if start <= curr < end:
            # The peak moves towards 1 as cycles pass: 1 - scale + ratio * scale.
            if start == 0:
                end_ratio = 1 - scale + end_ratio * scale
            else:
                start_ratio = 1 - scale + start_ratio * scale
            return anneal(base * start_ratio, base * end_ratio,
                          (curr - start) / (end - start))
    raise AssertionError(f'[cyclic schedule] update {update} fell in no phase of {phases}')


def one_cycle_phase(curr: int, phase_ends: Sequence[float]) -> Tuple[int, float]:
    """The phase ``curr`` is in and how far through it; each phase ends at its entry (inclusive)."""
    start = 0
    for i, end in enumerate(phase_ends):
        if curr <= end or i == len(phase_ends) - 1:
            return i, (curr - start) / (end - start)
        start = end
    raise AssertionError('[one-cycle schedule] no phases')


def one_cycle_ends(pct_start: float, total: int, three_phase: bool) -> List[float]:
    """Where the phases of a one-cycle schedule over ``total`` iterations end."""
    if three_phase:
        return [float(pct_start * total) - 1, float(2 * pct_start * total) - 2, total - 1]
    return [float(pct_start * total) - 1, total - 1]


def check_pct_start(owner: str, pct_start: Any) -> float:
    """``pct_start`` of a one-cycle schedule: a number in [0, 1]."""
    if (not isinstance(pct_start, numbers.Real) or isinstance(pct_start, bool)
            or not 0 <= pct_start <= 1):
        raise ValueError(f'{owner}: pct_start must be a number between 0 and 1, '
                         f'got {pct_start!r}.')
    return pct_start


def per_group(owner: str, name: str, optimizer: Any, value: Any,
              key: str) -> List[float]:
    """One value per param group of ``optimizer`` from a number, a list or a dict.

    A number is used for every group; a list must have one entry per group; a
    dict maps optimizer names (``name``) to either.
    """
    if isinstance(value, dict):
        if name not in value:
            raise KeyError(f'{owner}: {key} has no entry for optimizer {name!r}; '
                           f'it has {sorted(value)}.')
        value = value[name]
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return [value] * len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(f'{owner}: {key} has {len(value)} values but optimizer {name} '
                             f'has {len(optimizer.param_groups)} param groups; give one '
                             'value per group or a single number.')
        return list(value)
    raise ValueError(f'{owner}: {key} must be a number, a list (one per param group) or a '
                     f'dict (one per optimizer), got {type(value).__name__}.')


def as_public(values: Dict[Optional[str], list]) -> Union[list, Dict[str, list]]:
    """mmcv's shape: a list for one optimizer, a dict of lists for a dict of optimizers."""
    if not values:
        return []
    return values[None] if None in values else dict(values)
