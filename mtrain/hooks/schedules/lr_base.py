"""The base of the LR policies: warmup, progress in iterations, ``param_group['lr']``."""

from typing import Any, Dict, List, Optional, Union

from .base import ScheduleHook
from .formulas import as_public

__all__ = ['LrUpdaterHook']


class LrUpdaterHook(ScheduleHook):
    """Base of the LR policies: sets ``param_group['lr']`` before every iteration.

    A policy implements :meth:`get_lr`, the lr of a param group whose initial
    lr is ``base_lr``; it reads progress with :meth:`progress` and
    :meth:`progress_fraction` (epochs, or iterations as in mmcv —
    not optimizer updates). The initial lr of each group is its ``lr`` when the run
    starts, kept as ``initial_lr`` in the group so a resumed run (whose
    optimizer state carries it) schedules from the same start.

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
        super().__init__(by_epoch, warmup, warmup_iters, warmup_ratio, warmup_by_epoch)

    @property
    def base_lr(self) -> Union[List[float], Dict[str, List[float]]]:
        """Initial lr per group (a dict of lists for a dict of optimizers)."""
        return as_public(self._base)

    @property
    def regular_lr(self) -> Union[List[float], Dict[str, List[float]]]:
        """The policy's lr per group at the last iteration, before warmup."""
        return as_public(self._per_optimizer(self._regular))

    def get_lr(self, runner, base_lr: float) -> float:
        """The policy's lr for a group whose initial lr is ``base_lr``."""
        raise NotImplementedError(f'{type(self).__name__} must implement get_lr(runner, base_lr)')

    def _base_values(self, name: Optional[str], optimizer: Any) -> List[float]:
        for group in optimizer.param_groups:
            group.setdefault('initial_lr', group['lr'])
        return [group['initial_lr'] for group in optimizer.param_groups]

    def _write(self, group: Dict[str, Any], value: float) -> None:
        group['lr'] = value

    def _scheduled(self, runner, base: float, group: Dict[str, Any]) -> float:
        return self.get_lr(runner, base)
