"""Learning-rate schedules: ``lr_config=dict(policy='step', step=[8, 11], ...)``.

The builder turns ``policy`` into a class name: a policy in lower case is
title-cased and ``'LrUpdaterHook'`` appended (``'step'`` →
``StepLrUpdaterHook``); ``'CosineAnnealing'`` is used as written. Every
class gives the lr mmcv 1.7.2 gives at every iteration for the same config,
counting iterations as mmcv does (see
``docs/schedules.md``). The base class is in :mod:`.lr_base`, the cyclic
policies in :mod:`.lr_cyclic`; this module exports them all.
"""

from typing import Optional, Sequence, Union

from ...registry import HOOKS
from ...utils.errors import AssertedValueError
from .base import AnnealToMin
from .lr_base import LrUpdaterHook
from .lr_cyclic import CyclicLrUpdaterHook, OneCycleLrUpdaterHook
from .formulas import (annealing_cos, annealing_linear, check_steps, position_in_periods,
                       step_exponent)

__all__ = [
    'LrUpdaterHook', 'FixedLrUpdaterHook', 'StepLrUpdaterHook', 'ExpLrUpdaterHook',
    'PolyLrUpdaterHook', 'InvLrUpdaterHook', 'CosineAnnealingLrUpdaterHook',
    'FlatCosineAnnealingLrUpdaterHook', 'CosineRestartLrUpdaterHook',
    'LinearAnnealingLrUpdaterHook', 'CyclicLrUpdaterHook', 'OneCycleLrUpdaterHook'
]


@HOOKS.register_module()
class FixedLrUpdaterHook(LrUpdaterHook):
    """The initial lr throughout (with warmup, if any): ``policy='fixed'``."""

    def get_lr(self, runner, base_lr: float) -> float:
        return base_lr


@HOOKS.register_module()
class StepLrUpdaterHook(LrUpdaterHook):
    """Multiply the lr by ``gamma`` every ``step``, or at each milestone in ``step``.

    Example::

        lr_config = dict(policy='step', step=[8, 11], gamma=0.1, min_lr=1e-5)

    Args:
        step: an int (decay every ``step`` epochs/iterations) or a list of
            milestones (decay at each).
        gamma: the decay factor. Default: 0.1.
        min_lr: an absolute floor for every group's lr (not a ratio, as in
            mmcv). Default: None (no floor).
        **kwargs: :class:`LrUpdaterHook` arguments.
    """

    def __init__(self, step: Union[int, Sequence[int]], gamma: float = 0.1,
                 min_lr: Optional[float] = None, **kwargs) -> None:
        self.step = check_steps(type(self).__name__, step)
        self.gamma = gamma
        self.min_lr = min_lr
        super().__init__(**kwargs)

    def get_lr(self, runner, base_lr: float) -> float:
        lr = base_lr * (self.gamma**step_exponent(self.progress(runner), self.step))
        return lr if self.min_lr is None else max(lr, self.min_lr)


@HOOKS.register_module()
class ExpLrUpdaterHook(LrUpdaterHook):
    """``lr = base_lr * gamma ** progress``: ``policy='exp', gamma=0.9``."""

    def __init__(self, gamma: float, **kwargs) -> None:
        self.gamma = gamma
        super().__init__(**kwargs)

    def get_lr(self, runner, base_lr: float) -> float:
        return base_lr * self.gamma**self.progress(runner)


@HOOKS.register_module()
class PolyLrUpdaterHook(LrUpdaterHook):
    """``lr = (base_lr - min_lr) * (1 - progress / total) ** power + min_lr``.

    Example::

        lr_config = dict(policy='poly', power=0.9, min_lr=1e-4, by_epoch=False)

    Args:
        power: the polynomial's power. Default: 1.0.
        min_lr: the lr at the end of the run. Default: 0.
        **kwargs: :class:`LrUpdaterHook` arguments.
    """

    def __init__(self, power: float = 1., min_lr: float = 0., **kwargs) -> None:
        self.power = power
        self.min_lr = min_lr
        super().__init__(**kwargs)

    def get_lr(self, runner, base_lr: float) -> float:
        coeff = (1 - self.progress_fraction(runner))**self.power
        return (base_lr - self.min_lr) * coeff + self.min_lr


@HOOKS.register_module()
class InvLrUpdaterHook(LrUpdaterHook):
    """``lr = base_lr * (1 + gamma * progress) ** -power``: ``policy='inv', gamma=0.1``."""

    def __init__(self, gamma: float, power: float = 1., **kwargs) -> None:
        self.gamma = gamma
        self.power = power
        super().__init__(**kwargs)

    def get_lr(self, runner, base_lr: float) -> float:
        return base_lr * (1 + self.gamma * self.progress(runner))**(-self.power)


class _AnnealToMin(AnnealToMin, LrUpdaterHook):
    """An LR policy that anneals to ``min_lr`` or ``base_lr * min_lr_ratio`` (exactly one)."""

    def __init__(self, min_lr: Optional[float] = None, min_lr_ratio: Optional[float] = None,
                 **kwargs) -> None:
        super().__init__(min_lr, min_lr_ratio, **kwargs)


@HOOKS.register_module()
class CosineAnnealingLrUpdaterHook(_AnnealToMin):
    """Cosine from the initial lr to the minimum over the whole run.

    Example::

        lr_config = dict(policy='CosineAnnealing', min_lr_ratio=1e-3,
                         warmup='linear', warmup_iters=5, warmup_by_epoch=True)

    Args:
        min_lr: the final lr (absolute). Give this or ``min_lr_ratio``.
        min_lr_ratio: the final lr as a fraction of each group's initial lr.
        **kwargs: :class:`LrUpdaterHook` arguments.
    """

    def get_lr(self, runner, base_lr: float) -> float:
        return annealing_cos(base_lr, self.target(base_lr), self.progress_fraction(runner))


@HOOKS.register_module()
class LinearAnnealingLrUpdaterHook(_AnnealToMin):
    """A straight line from the initial lr to the minimum over the whole run.

    Example: ``lr_config = dict(policy='LinearAnnealing', min_lr=0, by_epoch=False)``.

    Args:
        min_lr: the final lr (absolute). Give this or ``min_lr_ratio``.
        min_lr_ratio: the final lr as a fraction of each group's initial lr.
        **kwargs: :class:`LrUpdaterHook` arguments.
    """

    def get_lr(self, runner, base_lr: float) -> float:
        return annealing_linear(base_lr, self.target(base_lr),
                                self.progress_fraction(runner))


@HOOKS.register_module()
class FlatCosineAnnealingLrUpdaterHook(_AnnealToMin):
    """The initial lr until ``start_percent`` of the run, then cosine to the minimum.

    Example::

        lr_config = dict(policy='FlatCosineAnnealing', start_percent=0.75, min_lr_ratio=0.01)

    Args:
        start_percent: where the annealing starts, as a fraction of the run
            (rounded to whole epochs/iterations), in [0, 1]. Default: 0.75.
        min_lr: the final lr (absolute). Give this or ``min_lr_ratio``.
        min_lr_ratio: the final lr as a fraction of each group's initial lr.
        **kwargs: :class:`LrUpdaterHook` arguments.
    """

    def __init__(self, start_percent: float = 0.75, min_lr: Optional[float] = None,
                 min_lr_ratio: Optional[float] = None, **kwargs) -> None:
        if not isinstance(start_percent, (int, float)) or not 0 <= start_percent <= 1:
            raise ValueError('FlatCosineAnnealingLrUpdaterHook: start_percent must be a '
                             f'number between 0 and 1, got {start_percent!r}.')
        self.start_percent = start_percent
        super().__init__(min_lr=min_lr, min_lr_ratio=min_lr_ratio, **kwargs)

    def get_lr(self, runner, base_lr: float) -> float:
        total = self.max_progress(runner)
        start = round(total * self.start_percent)
        progress = self.progress(runner)
        if progress < start:
            return base_lr
        factor = 1. if progress >= total else (progress - start) / (total - start)
        return annealing_cos(base_lr, self.target(base_lr), factor)


@HOOKS.register_module()
class CosineRestartLrUpdaterHook(_AnnealToMin):
    """Cosine annealing that restarts after each period, the restart scaled by a weight.

    Example::

        lr_config = dict(policy='CosineRestart', periods=[10, 10, 10],
                         restart_weights=[1, 0.5, 0.25], min_lr=1e-5)

    Args:
        periods: the length of each cycle in epochs/iterations; they must add
            up to at least the run's length.
        restart_weights: the amplitude of each cycle relative to the first.
            Default: 1 for every period.
        min_lr: the lr at the end of each cycle. Give this or ``min_lr_ratio``.
        min_lr_ratio: that lr as a fraction of each group's initial lr.
        **kwargs: :class:`LrUpdaterHook` arguments.
    """

    def __init__(self, periods: Sequence[int], restart_weights: Optional[Sequence[float]] = None,
                 min_lr: Optional[float] = None, min_lr_ratio: Optional[float] = None,
                 **kwargs) -> None:
        self.periods = list(periods)
        self.restart_weights = ([1] * len(self.periods) if restart_weights is None
                                else list(restart_weights))
        if len(self.periods) != len(self.restart_weights):
            raise AssertedValueError(f'CosineRestartLrUpdaterHook: periods ({len(self.periods)}) and '
                             f'restart_weights ({len(self.restart_weights)}) must have the '
                             'same length.')
        self.cumulative_periods = [sum(self.periods[:i + 1]) for i in range(len(self.periods))]
        super().__init__(min_lr=min_lr, min_lr_ratio=min_lr_ratio, **kwargs)

    def get_lr(self, runner, base_lr: float) -> float:
        progress = self.progress(runner)
        idx = position_in_periods(progress, self.cumulative_periods)
        nearest_restart = 0 if idx == 0 else self.cumulative_periods[idx - 1]
        alpha = min((progress - nearest_restart) / self.periods[idx], 1)
        return annealing_cos(base_lr, self.target(base_lr), alpha, self.restart_weights[idx])
