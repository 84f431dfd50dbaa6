"""Cyclic learning-rate schedules: ``policy='Cyclic'`` and ``policy='OneCycle'``.

Both count iterations (``by_epoch`` must stay False) and are usually
paired with the momentum policy of the same name.
"""

import numbers
from typing import Any, Dict, List, Optional, Sequence, Union

from ...registry import HOOKS
from ...utils.errors import AssertedValueError
from .lr_base import LrUpdaterHook
from .formulas import (anneal_func, check_pct_start, cyclic_phases, cyclic_value,
                            normalize_target_ratio, one_cycle_ends, one_cycle_phase, per_group)

__all__ = ['CyclicLrUpdaterHook', 'OneCycleLrUpdaterHook']


def _reject_by_epoch(owner: str, by_epoch: bool) -> None:
    if by_epoch:
        raise AssertedValueError(f'{owner} changes the lr every iteration; by_epoch=True is not '
                         'supported. Remove by_epoch from the config.')


@HOOKS.register_module()
class CyclicLrUpdaterHook(LrUpdaterHook):
    """Cycles the lr up to ``target_ratio[0]`` × initial and down to ``target_ratio[1]`` ×.

    The cyclical learning rate of https://arxiv.org/abs/1506.01186, with cosine
    (or linear) rather than triangular ramps. The run's iterations
    are split into ``cyclic_times`` cycles; each rises for ``step_ratio_up``
    of the cycle, then falls.

    Example::

        lr_config = dict(policy='Cyclic', target_ratio=(10, 1e-4), cyclic_times=1,
                         step_ratio_up=0.4)
        momentum_config = dict(policy='Cyclic', target_ratio=(0.85 / 0.95, 1),
                               cyclic_times=1, step_ratio_up=0.4)

    Args:
        by_epoch: must be False. Default: False.
        target_ratio: (highest, lowest) lr relative to the initial lr; a single
            number ``r`` means ``(r, r / 1e5)``. Default: (10, 1e-4).
        cyclic_times: cycles in the run. Default: 1.
        step_ratio_up: fraction of a cycle spent rising, in [0, 1). Default: 0.4.
        anneal_strategy: ``'cos'`` or ``'linear'``. Default: ``'cos'``.
        gamma: each cycle's amplitude is ``gamma`` × the previous one's, in
            (0, 1]. Default: 1.
        **kwargs: :class:`LrUpdaterHook` arguments (warmup).
    """

    def __init__(self, by_epoch: bool = False,
                 target_ratio: Union[float, Sequence[float]] = (10, 1e-4),
                 cyclic_times: int = 1, step_ratio_up: float = 0.4,
                 anneal_strategy: str = 'cos', gamma: float = 1, **kwargs) -> None:
        owner = type(self).__name__
        _reject_by_epoch(owner, by_epoch)
        self.target_ratio = normalize_target_ratio(owner, target_ratio)
        if not 0 <= step_ratio_up < 1:
            raise AssertedValueError(f'{owner}: step_ratio_up must be in [0, 1), got {step_ratio_up!r}.')
        if not 0 < gamma <= 1:
            raise AssertedValueError(f'{owner}: gamma must be in (0, 1], got {gamma!r}.')
        self.cyclic_times = cyclic_times
        self.step_ratio_up = step_ratio_up
        self.gamma = gamma
        self.anneal_func = anneal_func(anneal_strategy, owner)
        self.max_iter_per_phase: Optional[int] = None  # iterations per cycle (mmcv's name)
        self.lr_phases: List[list] = []
        super().__init__(by_epoch=False, **kwargs)

    def before_run(self, runner) -> None:
        super().before_run(runner)
        self.max_iter_per_phase, self.lr_phases = cyclic_phases(
            type(self).__name__, runner.max_iters, self.cyclic_times, self.step_ratio_up,
            self.target_ratio)

    def get_lr(self, runner, base_lr: float) -> float:
        update = min(runner.iter, runner.max_iters - 1)  # never past the end
        return cyclic_value(base_lr, update, self.max_iter_per_phase, self.lr_phases,
                            self.gamma, self.anneal_func)


@HOOKS.register_module()
class OneCycleLrUpdaterHook(LrUpdaterHook):
    """The 1cycle policy (https://arxiv.org/abs/1708.07120): up to ``max_lr``, then far down.

    The lr starts at ``max_lr / div_factor``, rises to ``max_lr`` over
    ``pct_start`` of ``total_steps`` iterations and falls to
    ``max_lr / div_factor / final_div_factor``. The optimizer's own lr is
    ignored: a single number ``max_lr`` gives every param group the same lr
    (as mmcv). ``total_steps`` must cover the whole run.

    Example::

        lr_config = dict(policy='OneCycle', max_lr=0.01, pct_start=0.3)
        momentum_config = dict(policy='OneCycle', base_momentum=0.85, max_momentum=0.95)

    Args:
        max_lr: the peak lr: a number for every group, a list with one per
            group, or a dict with one of those per optimizer (keyed by the
            optimizer's class name for a single optimizer).
        total_steps: the cycle's length in iterations. Default: the
            run's ``max_iters``.
        pct_start: fraction of the cycle spent rising. Default: 0.3.
        anneal_strategy: ``'cos'`` or ``'linear'``. Default: ``'cos'``.
        div_factor: initial lr = ``max_lr / div_factor``. Default: 25.
        final_div_factor: final lr = initial lr / ``final_div_factor``. Default: 1e4.
        three_phase: rise, fall back to the initial lr symmetrically, then
            fall to the final lr. Default: False.
        by_epoch: must be False. Default: False.
        **kwargs: :class:`LrUpdaterHook` arguments (warmup).
    """

    def __init__(self, max_lr: Union[float, List[float], Dict[str, Any]],
                 total_steps: Optional[int] = None, pct_start: float = 0.3,
                 anneal_strategy: str = 'cos', div_factor: float = 25,
                 final_div_factor: float = 1e4, three_phase: bool = False,
                 by_epoch: bool = False, **kwargs) -> None:
        owner = type(self).__name__
        _reject_by_epoch(owner, by_epoch)
        if not isinstance(max_lr, (numbers.Real, list, tuple, dict)) or isinstance(max_lr, bool):
            raise ValueError(f'{owner}: max_lr must be a number, a list (one per param group) '
                             f'or a dict (one per optimizer), got {type(max_lr).__name__}.')
        if total_steps is not None and (not isinstance(total_steps, int) or total_steps < 1):
            raise ValueError(f'{owner}: total_steps must be a positive integer, '
                             f'got {total_steps!r}.')
        self._max_lr = max_lr
        self.total_steps = total_steps
        self.pct_start = check_pct_start(owner, pct_start)
        self.anneal_func = anneal_func(anneal_strategy, owner)
        self.div_factor = div_factor
        self.final_div_factor = final_div_factor
        self.three_phase = three_phase
        self.lr_phases: List[list] = []  # [end iteration, start multiplier, end multiplier]
        super().__init__(by_epoch=False, **kwargs)

    def before_run(self, runner) -> None:
        total = self.total_steps if self.total_steps is not None else runner.max_iters
        if total < runner.max_iters:
            raise ValueError(
                f'OneCycleLrUpdaterHook: total_steps ({total}) is shorter than the run '
                f'({runner.max_iters} iterations). Set total_steps to at least '
                f'{runner.max_iters}, or leave it out to use the run length.')
        super().before_run(runner)
        ends = one_cycle_ends(self.pct_start, total, self.three_phase)
        div, final = self.div_factor, 1 / self.final_div_factor
        multipliers = [(1, div), (div, 1), (1, final)] if self.three_phase else [(1, div),
                                                                                (div, final)]
        self.lr_phases = [[end, start, stop] for end, (start, stop) in zip(ends, multipliers)]
        self._last_update = total - 1

    def _base_values(self, name: Optional[str], optimizer: Any) -> List[float]:
        # The initial lr comes from max_lr, not from the optimizer.
        key = name if name is not None else type(optimizer).__name__
        max_lrs = per_group(type(self).__name__, key, optimizer, self._max_lr, 'max_lr')
        base = [lr / self.div_factor for lr in max_lrs]
        for group, lr in zip(optimizer.param_groups, base):
            group.setdefault('initial_lr', lr)
        return base

    def get_lr(self, runner, base_lr: float) -> float:
        update = min(runner.iter, self._last_update)  # never past the end
        phase, pct = one_cycle_phase(update, [end for end, _, _ in self.lr_phases])
        _, start, stop = self.lr_phases[phase]
        return self.anneal_func(base_lr * start, base_lr * stop, pct)
