"""What the LR and momentum updater hooks share: mmcv 1.7.2's update algorithm.

A schedule gives each param group a value (an lr, a momentum) from the
group's initial value and the run's progress. Progress is ``runner.epoch``
(``by_epoch=True``) or ``runner.iter``, the iterations done so far, exactly
as in mmcv 1.7.2: an mmcv config's ``step=[60000]`` means iteration 60000
whether or not gradients are accumulated (``cumulative_iters``) or an fp16
step is skipped. Only ``policy='Torch'`` counts optimizer updates.
"""

from typing import Any, Dict, List, Optional, Tuple, Union

from ..hook import Hook
from .formulas import check_min_or_ratio, check_warmup, target_value, warmup_factor

Values = Union[List[float], Dict[str, List[float]]]  # mmcv's shape: per group, or per optimizer


class ScheduleHook(Hook):
    """Base of :class:`LrUpdaterHook` and :class:`MomentumUpdaterHook`: mmcv's algorithm.

    The stages call the methods a subclass may replace exactly where mmcv
    1.7.2 calls them (shown for the LR hook; the momentum hook's names have
    ``momentum`` for ``lr``)::

        before_run          self.base_lr = each group's initial_lr
        before_train_epoch  resolve warmup_by_epoch; if by_epoch:
                                self.regular_lr = self.get_regular_lr(runner)
                                self._set_lr(runner, self.regular_lr)
        before_train_iter   by iteration: self.regular_lr = self.get_regular_lr(runner),
                                then _set_lr with it, or with self.get_warmup_lr(runner.iter)
                                while warming up;
                            by epoch: only the warmup (get_warmup_lr), and the regular
                                lr once at the iteration the warmup ends
        get_regular_lr      [self.get_lr(runner, b) for b in self.base_lr] (dict per optimizer)

    ``base_lr`` and ``regular_lr`` are plain attributes a subclass may assign.
    ``_set_lr`` reads ``runner.optimizer.param_groups`` at every call, so an
    optimizer whose state was reloaded (a rollback with
    ``optimizer.load_state_dict``, which replaces the group dicts) keeps
    being scheduled. A param group added mid-run keeps its own value, as in
    mmcv (``base_lr`` has one entry per group seen at ``before_run``); append
    its initial value to ``hook.base_lr`` to schedule it.

    mtrain's additions, which mmcv lacks: under ``IterBasedRunner`` (which
    never calls ``before_train_epoch``) a by-epoch schedule recomputes the
    regular value at the first iteration of each new ``runner.epoch``, and
    ``warmup_by_epoch`` learns the epoch length there (docs/schedules.md).

    Every policy, mtrain's own included, is asked at every iteration it
    updates, as in mmcv: nothing is cached between iterations, so whatever a
    policy reads (its attributes, the runner, a new attribute a subclass
    adds) is read when the value is due. (An earlier version computed
    mtrain's own by-iteration policies ahead, keyed on a hand-kept list of
    what they read; it saved 0.3 % of an iteration through ``tools/train.py``
    (docs/benchmarks.md) and was removed.)

    Args:
        by_epoch: the value changes once per epoch (True) or every iteration.
        warmup: ``'constant'``, ``'linear'``, ``'exp'`` or None (no warmup).
        warmup_iters: warmup length in iterations, or in epochs with
            ``warmup_by_epoch``.
        warmup_ratio: warmup starts at ``warmup_ratio`` × the regular value.
        warmup_by_epoch: ``warmup_iters`` counts epochs.
    """

    #: mmcv's attribute names for the initial and the regular values.
    _base_attr, _regular_attr = 'base_lr', 'regular_lr'

    def __init__(self, by_epoch: bool, warmup: Optional[str], warmup_iters: float,
                 warmup_ratio: float, warmup_by_epoch: bool) -> None:
        check_warmup(type(self).__name__, warmup, warmup_iters, warmup_ratio)
        self.by_epoch = by_epoch
        self.warmup = warmup
        self.warmup_ratio = warmup_ratio
        self.warmup_by_epoch = warmup_by_epoch
        # Known once the epoch length is (see _resolve_warmup_iters).
        self.warmup_epochs: Optional[float] = warmup_iters if warmup_by_epoch else None
        self.warmup_iters: Optional[float] = None if warmup_by_epoch else warmup_iters
        self._regular_epoch: Optional[int] = None  # the epoch the regular value is of

    # -- what LrUpdaterHook / MomentumUpdaterHook map onto mmcv's names -----
    def _base_values(self, name: Optional[str], optimizer: Any) -> List[float]:
        """Each group's initial value, recorded in the group (``initial_lr``)."""
        raise NotImplementedError

    def _write(self, group: Dict[str, Any], value: float) -> None:
        """Put ``value`` into one param group."""
        raise NotImplementedError

    def _get_regular(self, runner) -> Values:  # get_regular_lr
        raise NotImplementedError

    def _get_warmup(self, cur_iters: int) -> Values:  # get_warmup_lr
        raise NotImplementedError

    def _set(self, runner, values: Values) -> None:  # _set_lr
        raise NotImplementedError

    def _keep_base(self, values: Values) -> None:  # self.base_lr = values
        setattr(self, self._base_attr, values)

    def _keep_regular(self, values: Values) -> None:  # self.regular_lr = values
        setattr(self, self._regular_attr, values)

    def _kept_regular(self) -> Values:  # self.regular_lr
        return getattr(self, self._regular_attr)

    # -- progress (mtrain's helpers for policies) -------------------------
    def progress(self, runner) -> int:
        """``runner.epoch`` when ``by_epoch``, else the iterations done so far (mmcv's)."""
        return runner.epoch if self.by_epoch else runner.iter

    def max_progress(self, runner) -> float:
        """The run's length in epochs or iterations, read from the runner each time.

        Under ``IterBasedRunner`` (no ``max_epochs``) a by-epoch schedule
        takes the run's length in epochs as ``max_iters / len(data_loader)``.
        """
        if not self.by_epoch:
            return runner.max_iters
        if getattr(runner, 'max_epochs', None) is not None:
            return runner.max_epochs
        return runner.max_iters / len(runner.data_loader)

    def progress_fraction(self, runner) -> float:
        """How far through the run, clamped to 1 so a schedule never goes past its end."""
        total = self.max_progress(runner)
        return min(self.progress(runner), total) / total

    # -- stages (mmcv 1.7.2's) ---------------------------------------------
    def before_run(self, runner) -> None:
        base = {name: self._base_values(name, optimizer)
                for name, optimizer in _named_optimizers(runner)}
        self._keep_base(base[None] if None in base else base)
        self._regular_epoch = None

    def before_train_epoch(self, runner) -> None:
        self._resolve_warmup_iters(runner)
        if not self.by_epoch:
            return
        self._refresh_regular(runner)
        self._set(runner, self._kept_regular())

    def before_train_iter(self, runner) -> None:
        if self.warmup_iters is None:  # IterBasedRunner: no before_train_epoch
            self._resolve_warmup_iters(runner)
        cur = runner.iter
        if not self.by_epoch:
            self._keep_regular(self._get_regular(runner))
            if self.warmup is None or cur >= self.warmup_iters:
                self._set(runner, self._kept_regular())
            else:
                self._set(runner, self._get_warmup(cur))
            return
        fresh = runner.epoch != self._regular_epoch
        if fresh:  # a new epoch without before_train_epoch (IterBasedRunner)
            self._refresh_regular(runner)
        if self.warmup is None or cur > self.warmup_iters:
            if fresh:
                self._set(runner, self._kept_regular())
        elif cur == self.warmup_iters:
            self._set(runner, self._kept_regular())
        else:
            self._set(runner, self._get_warmup(cur))

    # -- mmcv's algorithm on either value, for the named methods -----------
    def _regular_from(self, runner, get_value, base: Values) -> Values:
        """mmcv's ``get_regular_*``: ``get_value(runner, b)`` for each initial value ``b``."""
        if isinstance(base, dict):
            return {name: [get_value(runner, b) for b in values] for name, values in base.items()}
        return [get_value(runner, b) for b in base]

    def _warmup_from(self, cur_iters: int, regular: Values) -> Values:
        """mmcv's ``get_warmup_*`` shape: the regular values times the warmup factor."""
        factor = warmup_factor(self.warmup, cur_iters, self.warmup_iters, self.warmup_ratio)
        if isinstance(regular, dict):
            return {name: [v * factor for v in values] for name, values in regular.items()}
        return [v * factor for v in regular]

    def _set_from(self, runner, values: Values) -> None:
        """mmcv's ``_set_*``: the optimizer's param groups, read now, zipped with ``values``."""
        write = self._write
        if isinstance(runner.optimizer, dict):
            for name, optimizer in runner.optimizer.items():
                for group, value in zip(optimizer.param_groups, values[name]):
                    write(group, value)
        else:
            for group, value in zip(runner.optimizer.param_groups, values):
                write(group, value)

    # -- helpers -----------------------------------------------------------
    def _refresh_regular(self, runner) -> None:
        self._keep_regular(self._get_regular(runner))
        self._regular_epoch = runner.epoch

    def _resolve_warmup_iters(self, runner) -> None:
        if self.warmup_iters is None:
            self.warmup_iters = self.warmup_epochs * len(runner.data_loader)


def _named_optimizers(runner) -> List[Tuple[Optional[str], Any]]:
    if isinstance(runner.optimizer, dict):
        return list(runner.optimizer.items())
    return [(None, runner.optimizer)]


class AnnealToMin:
    """Mixin of the policies that end at ``min_<value>`` or ``base × min_<value>_ratio``.

    Shared by the LR and momentum annealing policies; ``value_name`` says
    which keyword pair (``min_lr`` / ``min_lr_ratio``, ``min_momentum`` /
    ``min_momentum_ratio``) the subclass takes. Exactly one must be given.
    """

    value_name = 'lr'

    def __init__(self, minimum: Optional[float], ratio: Optional[float], **kwargs) -> None:
        check_min_or_ratio(type(self).__name__, self.value_name, minimum, ratio)
        # mmcv's attribute names (min_lr, min_lr_ratio, ...), which user code may read.
        setattr(self, f'min_{self.value_name}', minimum)
        setattr(self, f'min_{self.value_name}_ratio', ratio)
        super().__init__(**kwargs)

    def target(self, base: float) -> float:
        """Where a group whose initial value is ``base`` ends."""
        return target_value(base, getattr(self, f'min_{self.value_name}'),
                            getattr(self, f'min_{self.value_name}_ratio'))
