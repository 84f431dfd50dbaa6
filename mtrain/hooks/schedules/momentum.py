"""Momentum schedules: ``momentum_config=dict(policy='CosineAnnealing', ...)``.

Named like the LR policies (``policy`` + ``'MomentumUpdaterHook'``). They set
``param_group['momentum']`` (SGD, RMSprop) or the first of
``param_group['betas']`` (Adam and friends), and give mmcv 1.7.2's numbers
except during warmup, where mtrain scales the momentum *down* by the LR
warmup factor instead of dividing it up past its configured value (see
``docs/schedules.md``, "Differences from mmcv 1.x").
"""

import numbers
from typing import Any, Dict, List, Optional, Sequence, Union

from ...registry import HOOKS
from ...utils.errors import AssertedValueError
from .base import AnnealToMin, ScheduleHook, Values
from .formulas import (annealing_cos, annealing_linear, anneal_func,
                       check_pct_start, check_steps, cyclic_phases, cyclic_value,
                       normalize_target_ratio, one_cycle_ends, one_cycle_phase, per_group,
                       step_exponent)

__all__ = [
    'MomentumUpdaterHook', 'StepMomentumUpdaterHook', 'CosineAnnealingMomentumUpdaterHook',
    'LinearAnnealingMomentumUpdaterHook', 'CyclicMomentumUpdaterHook',
    'OneCycleMomentumUpdaterHook'
]


def _momentum_key(group: Dict[str, Any], owner: str) -> str:
    if 'momentum' in group:
        return 'momentum'
    if 'betas' in group:
        return 'betas'
    raise ValueError(f'{owner} needs an optimizer with `momentum` (SGD, RMSprop) or `betas` '
                     f'(Adam, AdamW); this param group has neither (keys: '
                     f'{sorted(k for k in group if k != "params")}). Remove momentum_config.')


class MomentumUpdaterHook(ScheduleHook):
    """Base of the momentum policies: sets each group's momentum before every iteration.

    A policy implements :meth:`get_momentum`, the momentum of a group whose
    initial momentum is ``base_momentum`` (kept in the group as
    ``initial_momentum``). Warmup multiplies the regular momentum by the same
    factor an LR warmup with these settings would use, so it rises to the
    configured value and never exceeds it.

    Args:
        by_epoch: the momentum changes once per epoch (True) or every iteration.
            Default: True.
        warmup: ``'constant'``, ``'linear'``, ``'exp'`` or None. Default: None.
        warmup_iters: warmup length in iterations (epochs with
            ``warmup_by_epoch``). Default: 0.
        warmup_ratio: the first warmup momentum is ``warmup_ratio`` × the
            regular one. Default: 0.9.
        warmup_by_epoch: ``warmup_iters`` counts epochs (an mtrain addition).
            Default: False.
    """

    priority = 'HIGH'
    _base_attr, _regular_attr = 'base_momentum', 'regular_momentum'

    def __init__(self, by_epoch: bool = True, warmup: Optional[str] = None,
                 warmup_iters: float = 0, warmup_ratio: float = 0.9,
                 warmup_by_epoch: bool = False) -> None:
        self.base_momentum: Values = []  # initial momentum per group (dict per optimizer)
        self.regular_momentum: Values = []  # the policy's momentum per group, before warmup
        super().__init__(by_epoch, warmup, warmup_iters, warmup_ratio, warmup_by_epoch)

    def get_momentum(self, runner, base_momentum: float) -> float:
        """The policy's momentum for a group whose initial momentum is ``base_momentum``."""
        raise NotImplementedError(
            f'{type(self).__name__} must implement get_momentum(runner, base_momentum)')

    def get_regular_momentum(self, runner) -> Values:
        """``get_momentum`` of each ``self.base_momentum`` (mmcv's)."""
        return self._regular_from(runner, self.get_momentum, self.base_momentum)

    def get_warmup_momentum(self, cur_iters: int) -> Values:
        """``self.regular_momentum`` times the LR warmup factor (mtrain's; mmcv divides)."""
        return self._warmup_from(cur_iters, self.regular_momentum)

    def _set_momentum(self, runner, momentum_groups: Values) -> None:
        """Write ``momentum_groups`` into the optimizer's param groups, read now (mmcv's)."""
        self._set_from(runner, momentum_groups)

    # -- the base class's names for the above -----------------------------
    def _get_regular(self, runner) -> Values:
        return self.get_regular_momentum(runner)

    def _get_warmup(self, cur_iters: int) -> Values:
        return self.get_warmup_momentum(cur_iters)

    def _set(self, runner, values: Values) -> None:
        self._set_momentum(runner, values)

    def _base_values(self, name: Optional[str], optimizer: Any) -> List[float]:
        for group in optimizer.param_groups:
            key = _momentum_key(group, type(self).__name__)
            group.setdefault('initial_momentum',
                             group['momentum'] if key == 'momentum' else group['betas'][0])
        return [group['initial_momentum'] for group in optimizer.param_groups]

    def _write(self, group: Dict[str, Any], value: float) -> None:
        if 'momentum' in group:
            group['momentum'] = value
        elif 'betas' in group:
            group['betas'] = (value, group['betas'][1])


@HOOKS.register_module()
class StepMomentumUpdaterHook(MomentumUpdaterHook):
    """Multiply the momentum by ``gamma`` every ``step``, or at each milestone.

    Example: ``momentum_config = dict(policy='step', step=[8, 11], gamma=0.5)``.

    Args:
        step: an int (decay every ``step`` epochs/iterations) or a list of milestones.
        gamma: the decay factor. Default: 0.5.
        min_momentum: an absolute floor. Default: None (no floor).
        **kwargs: :class:`MomentumUpdaterHook` arguments.
    """

    def __init__(self, step: Union[int, Sequence[int]], gamma: float = 0.5,
                 min_momentum: Optional[float] = None, **kwargs) -> None:
        self.step = check_steps(type(self).__name__, step)
        self.gamma = gamma
        self.min_momentum = min_momentum
        super().__init__(**kwargs)

    def get_momentum(self, runner, base_momentum: float) -> float:
        momentum = base_momentum * (self.gamma**step_exponent(self.progress(runner), self.step))
        return momentum if self.min_momentum is None else max(momentum, self.min_momentum)


class _AnnealToMin(AnnealToMin, MomentumUpdaterHook):
    """Anneals to ``min_momentum`` or ``base * min_momentum_ratio`` (exactly one given)."""

    value_name = 'momentum'

    def __init__(self, min_momentum: Optional[float] = None,
                 min_momentum_ratio: Optional[float] = None, **kwargs) -> None:
        super().__init__(min_momentum, min_momentum_ratio, **kwargs)


@HOOKS.register_module()
class CosineAnnealingMomentumUpdaterHook(_AnnealToMin):
    """Cosine from the initial momentum to the minimum over the run.

    Example: ``momentum_config = dict(policy='CosineAnnealing', min_momentum_ratio=0.85 / 0.95)``.
    """

    def get_momentum(self, runner, base_momentum: float) -> float:
        return annealing_cos(base_momentum, self.target(base_momentum),
                             self.progress_fraction(runner))


@HOOKS.register_module()
class LinearAnnealingMomentumUpdaterHook(_AnnealToMin):
    """A straight line from the initial momentum to the minimum over the run.

    Example: ``momentum_config = dict(policy='LinearAnnealing', min_momentum=0.85)``.
    """

    def get_momentum(self, runner, base_momentum: float) -> float:
        return annealing_linear(base_momentum, self.target(base_momentum),
                                self.progress_fraction(runner))


@HOOKS.register_module()
class CyclicMomentumUpdaterHook(MomentumUpdaterHook):
    """Cycles the momentum inversely to :class:`CyclicLrUpdaterHook`.

    Args:
        by_epoch: must be False. Default: False.
        target_ratio: (lowest, highest) momentum relative to the initial one.
            Default: (0.85 / 0.95, 1).
        cyclic_times: cycles in the run. Default: 1.
        step_ratio_up: fraction of a cycle spent in the first phase. Default: 0.4.
        anneal_strategy: ``'cos'`` or ``'linear'``. Default: ``'cos'``.
        gamma: each cycle's amplitude is ``gamma`` × the previous one's. Default: 1.
        **kwargs: :class:`MomentumUpdaterHook` arguments.
    """

    def __init__(self, by_epoch: bool = False,
                 target_ratio: Union[float, Sequence[float]] = (0.85 / 0.95, 1.),
                 cyclic_times: int = 1, step_ratio_up: float = 0.4,
                 anneal_strategy: str = 'cos', gamma: float = 1., **kwargs) -> None:
        owner = type(self).__name__
        if by_epoch:
            raise AssertedValueError(f'{owner} changes the momentum every iteration; '
                             'by_epoch=True is not supported. Remove by_epoch.')
        self.target_ratio = normalize_target_ratio(owner, target_ratio)
        if not 0 <= step_ratio_up < 1:
            raise AssertedValueError(f'{owner}: step_ratio_up must be in [0, 1), got {step_ratio_up!r}.')
        self.cyclic_times = cyclic_times
        self.step_ratio_up = step_ratio_up
        self.gamma = gamma
        self.anneal_func = anneal_func(anneal_strategy, owner)
        self.max_iter_per_phase: Optional[int] = None
        self.momentum_phases: List[list] = []
        super().__init__(by_epoch=False, **kwargs)

    def before_run(self, runner) -> None:
        super().before_run(runner)
        self.max_iter_per_phase, self.momentum_phases = cyclic_phases(
            type(self).__name__, runner.max_iters, self.cyclic_times, self.step_ratio_up,
            self.target_ratio)

    def get_momentum(self, runner, base_momentum: float) -> float:
        update = min(runner.iter, runner.max_iters - 1)
        return cyclic_value(base_momentum, update, self.max_iter_per_phase,
                            self.momentum_phases, self.gamma, self.anneal_func)


@HOOKS.register_module()
class OneCycleMomentumUpdaterHook(MomentumUpdaterHook):
    """Momentum of the 1cycle policy: down while the lr rises, back up while it falls.

    Each group's momentum starts at ``max_momentum``, falls to
    ``base_momentum`` over ``pct_start`` of the run's iterations and rises back.
    The optimizer's own momentum is replaced when the run starts.

    Args:
        base_momentum: the lowest momentum (at the lr's peak): a number, a list
            (one per group) or a dict (one per optimizer). Default: 0.85.
        max_momentum: the highest momentum (at the start). Default: 0.95.
        pct_start: fraction of the run spent falling. Default: 0.3.
        anneal_strategy: ``'cos'`` or ``'linear'``. Default: ``'cos'``.
        three_phase: fall, rise back, then stay at ``max_momentum``. Default: False.
        by_epoch: must be False. Default: False.
        **kwargs: :class:`MomentumUpdaterHook` arguments.
    """


    def __init__(self, base_momentum: Union[float, list, dict] = 0.85,
                 max_momentum: Union[float, list, dict] = 0.95, pct_start: float = 0.3,
                 anneal_strategy: str = 'cos', three_phase: bool = False,
                 by_epoch: bool = False, **kwargs) -> None:
        owner = type(self).__name__
        if by_epoch:
            raise AssertedValueError(f'{owner} changes the momentum every iteration; '
                             'by_epoch=True is not supported. Remove by_epoch.')
        for key, value in (('base_momentum', base_momentum), ('max_momentum', max_momentum)):
            if isinstance(value, bool) or not isinstance(value, (numbers.Real, list, dict)):
                raise ValueError(f'{owner}: {key} must be a number, a list (one per param '
                                 f'group) or a dict (one per optimizer), got {value!r}.')
        self._base_momentum = base_momentum
        self._max_momentum = max_momentum
        self.pct_start = check_pct_start(owner, pct_start)
        self.anneal_func = anneal_func(anneal_strategy, owner)
        self.three_phase = three_phase
        self.momentum_phases: List[dict] = []
        super().__init__(by_epoch=False, **kwargs)

    def before_run(self, runner) -> None:
        super().before_run(runner)
        ends = one_cycle_ends(self.pct_start, runner.max_iters, self.three_phase)
        keys = [('max_momentum', 'base_momentum'), ('base_momentum', 'max_momentum')]
        if self.three_phase:
            keys.append(('max_momentum', 'max_momentum'))
        self.momentum_phases = [dict(end_iter=end, start_momentum=a, end_momentum=b)
                                for end, (a, b) in zip(ends, keys)]
        self._last_update = runner.max_iters - 1

    def _base_values(self, name: Optional[str], optimizer: Any) -> List[float]:
        owner = type(self).__name__
        key = name if name is not None else type(optimizer).__name__
        lows = per_group(owner, key, optimizer, self._base_momentum, 'base_momentum')
        highs = per_group(owner, key, optimizer, self._max_momentum, 'max_momentum')
        for group, low, high in zip(optimizer.param_groups, lows, highs):
            _momentum_key(group, owner)
            self._write(group, high)
            group['base_momentum'] = low
            group['max_momentum'] = high
        return highs

    def get_momentum(self, runner, param_group: Dict[str, Any]) -> float:
        """The momentum of one param group, from its own bounds (mmcv's signature)."""
        update = min(runner.iter, self._last_update)
        phase, pct = one_cycle_phase(update, [p['end_iter'] for p in self.momentum_phases])
        phase = self.momentum_phases[phase]
        return self.anneal_func(param_group[phase['start_momentum']],
                                param_group[phase['end_momentum']], pct)

    def get_regular_momentum(self, runner) -> Values:
        """``get_momentum`` of each param group of the optimizer, read now (as mmcv)."""
        if isinstance(runner.optimizer, dict):
            return {name: [self.get_momentum(runner, group) for group in optim.param_groups]
                    for name, optim in runner.optimizer.items()}
        return [self.get_momentum(runner, group) for group in runner.optimizer.param_groups]
