"""The base of the LR policies: warmup, progress in iterations, ``param_group['lr']``."""

from typing import Any, Dict, List, Optional

from .base import ScheduleHook, Values

__all__ = ['LrUpdaterHook']


class LrUpdaterHook(ScheduleHook):
    """Base of the LR policies: sets ``param_group['lr']`` before every iteration.

    A policy implements :meth:`get_lr`, the lr of a param group whose initial
    lr is ``base_lr``; it reads progress with :meth:`progress` and
    :meth:`progress_fraction` (epochs, or iterations as in mmcv —
    not optimizer updates). As in mmcv 1.7.2, a subclass may also replace
    :meth:`get_regular_lr`, :meth:`get_warmup_lr` and :meth:`_set_lr`, and
    assign ``self.base_lr`` / ``self.regular_lr``; the stages call them where
    mmcv does (see :class:`~.base.ScheduleHook`). The initial lr of each
    group is its ``lr`` when the run starts, kept as ``initial_lr`` in the
    group so a resumed run (whose optimizer state carries it) schedules from
    the same start.

    Example::

        lr_config = dict(policy='step', step=[8, 11],
                         warmup='linear', warmup_iters=500, warmup_ratio=0.001)

    Args:
        by_epoch: the lr changes once per epoch (True) or every iteration. Default: True.
        warmup: ``'constant'``, ``'linear'``, ``'exp'`` or None. Default: None.
        warmup_iters: warmup length in iterations (epochs with
            ``warmup_by_epoch``). Default: 0.
        warmup_ratio: the first warmup lr is ``warmup_ratio`` × the regular lr.
            Default: 0.1.
        warmup_by_epoch: ``warmup_iters`` counts epochs. Default: False.
    """

    priority = 'VERY_HIGH'

    def __init__(self, by_epoch: bool = True, warmup: Optional[str] = None,
                 warmup_iters: float = 0, warmup_ratio: float = 0.1,
                 warmup_by_epoch: bool = False) -> None:
        self.base_lr: Values = []  # initial lr per group (a dict of lists per optimizer)
        self.regular_lr: Values = []  # the policy's lr per group, before warmup
        super().__init__(by_epoch, warmup, warmup_iters, warmup_ratio, warmup_by_epoch)

    def get_lr(self, runner, base_lr: float) -> float:
        """The policy's lr for a group whose initial lr is ``base_lr``."""
        raise NotImplementedError(f'{type(self).__name__} must implement get_lr(runner, base_lr)')

    def get_regular_lr(self, runner) -> Values:
        """Each group's lr without warmup: ``get_lr`` of each ``self.base_lr`` (mmcv's)."""
        return self._regular_from(runner, self.get_lr, self.base_lr)

    def get_warmup_lr(self, cur_iters: int) -> Values:
        """``self.regular_lr`` scaled by the warmup factor at iteration ``cur_iters`` (mmcv's)."""
        return self._warmup_from(cur_iters, self.regular_lr)

    def _set_lr(self, runner, lr_groups: Values) -> None:
        """Write ``lr_groups`` into ``runner.optimizer``'s param groups, read now (mmcv's)."""
        self._set_from(runner, lr_groups)

    # -- the base class's names for the above -----------------------------
    def _get_regular(self, runner) -> Values:
        return self.get_regular_lr(runner)

    def _get_warmup(self, cur_iters: int) -> Values:
        return self.get_warmup_lr(cur_iters)

    def _set(self, runner, values: Values) -> None:
        self._set_lr(runner, values)

    def _base_values(self, name: Optional[str], optimizer: Any) -> List[float]:
        for group in optimizer.param_groups:
            group.setdefault('initial_lr', group['lr'])
        return [group['initial_lr'] for group in optimizer.param_groups]

    def _write(self, group: Dict[str, Any], value: float) -> None:
        group['lr'] = value
