"""What the LR and momentum updater hooks share: progress, warmup, writing param groups.

A schedule gives each param group a value (an lr, a momentum) from the
group's initial value and the run's progress. Progress is ``runner.epoch``
(``by_epoch=True``) or ``runner.iter``, the iterations done so far, exactly
as in mmcv 1.7.2: an mmcv config's ``step=[60000]`` means iteration 60000
whether or not gradients are accumulated (``cumulative_iters``) or an fp16
step is skipped. Only ``policy='Torch'`` counts optimizer updates.
"""

from typing import Any, Dict, List, Optional, Tuple

from ..hook import Hook
from .formulas import check_min_or_ratio, check_warmup, target_value, warmup_factor

Values = Dict[Optional[str], List[float]]  # optimizer name (None: the only one) -> per group

#: How many iterations a by-iteration schedule of mtrain's own computes at a time.
AHEAD = 512

#: The methods that decide a policy's value. If the first class (in the MRO)
#: defining any of them is one of mtrain's, the value is a function of the
#: iteration and the run's length alone, and can be computed ahead.
_POLICY_METHODS = ('get_lr', 'get_momentum', '_scheduled', 'progress', 'progress_fraction',
                   'max_progress')


class ScheduleHook(Hook):
    """Base of :class:`LrUpdaterHook` and :class:`MomentumUpdaterHook`.

    Each iteration, before the forward pass, the hook computes the *regular*
    value of every param group (what the policy says, without warmup) and
    writes either it or, while warming up, ``regular × warmup factor``.

    With ``by_epoch=True`` the regular value is computed once per epoch: at
    ``before_train_epoch``, or at the first iteration of a new
    ``runner.epoch`` when the runner never calls ``before_train_epoch``
    (``IterBasedRunner``). Warmup is always counted in iterations;
    ``warmup_by_epoch=True`` converts ``warmup_iters`` epochs into iterations
    with ``len(runner.data_loader)`` the first time the hook sees a loader.

    Subclasses say how to read and write their value (:meth:`_base_values`,
    :meth:`_write`) and what the policy gives (:meth:`_scheduled`).

    **Computed ahead.** mtrain's own policies are functions of the iteration
    and the run's length, so with ``by_epoch=False`` the hook computes the
    values of the next ``AHEAD`` iterations at once (the same formulas, the
    same numbers) and each iteration only writes its row into the param
    groups: the per-iteration cost drops from a dozen Python calls to one. A
    policy of the user's own (a subclass that overrides ``get_lr``, ``progress``
    …) may read anything on the runner, so it is asked every iteration, as in
    mmcv. A resumed run, or any jump of ``runner.iter``, recomputes from there.

    The hook keeps no state of its own across a resume: the initial values
    live in the optimizer's param groups (``initial_lr``,
    ``initial_momentum``), which the optimizer checkpoint carries, and the
    rest follows from ``runner.epoch`` / ``runner.iter``.

    A param group may hold many parameters (``paramwise_cfg`` merges the
    parameters that share settings): its value is computed once from its
    ``initial_*``, which is what mmcv computes for each of those parameters.

    Args:
        by_epoch: the value changes once per epoch (True) or every iteration.
        warmup: ``'constant'``, ``'linear'``, ``'exp'`` or None (no warmup).
        warmup_iters: warmup length in iterations, or in epochs with
            ``warmup_by_epoch``.
        warmup_ratio: warmup starts at ``warmup_ratio`` × the regular value.
        warmup_by_epoch: ``warmup_iters`` counts epochs.
    """

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
        self._base: Values = {}
        self._named_optimizers: List[Tuple[Optional[str], Any]] = []  # fixed for a run
        # Every (optimizer name, param group, initial value), flat: the per-iteration
        # loops walk one list (a few merged groups) instead of nested dicts.
        self._slots: List[Tuple[Optional[str], Dict[str, Any], float]] = []
        self._groups: List[Dict[str, Any]] = []  # the slots' param groups
        self._max_iters: Optional[int] = None  # the run's length, once known
        self._regular: List[float] = []  # one per slot
        self._regular_epoch: Optional[int] = None  # the epoch _regular was computed for
        self._warming_up = False  # the last value written was a warmup value
        # By iteration: (regular, written) values of iterations _ahead_start, _ahead_start + 1, …
        self._ahead: Optional[List[Tuple[List[float], List[float]]]] = None
        self._ahead_start = 0

    # -- for subclasses ------------------------------------------------------
    def _base_values(self, name: Optional[str], optimizer: Any) -> List[float]:
        """The initial value of each param group (recorded in the group)."""
        raise NotImplementedError

    #: Whether :meth:`_scheduled` reads the group beyond its initial value
    #: (OneCycle momentum's per-group bounds); if not, groups that share an
    #: initial value share one computation.
    reads_group = False

    def _write(self, group: Dict[str, Any], value: float) -> None:
        raise NotImplementedError

    def _scheduled(self, runner, base: float, group: Dict[str, Any]) -> float:
        """The regular value of one param group whose initial value is ``base``."""
        raise NotImplementedError

    # -- progress ----------------------------------------------------------
    def progress(self, runner) -> int:
        """``runner.epoch`` when ``by_epoch``, else the iterations done so far (mmcv's)."""
        return runner.epoch if self.by_epoch else runner.iter

    def max_progress(self, runner) -> float:
        """The run's length in epochs or iterations.

        Under ``IterBasedRunner`` (no ``max_epochs``) a by-epoch schedule
        takes the run's length in epochs as ``max_iters / len(data_loader)``.
        """
        if not self.by_epoch:
            if self._max_iters is None:  # fixed for the run: computed once
                self._max_iters = runner.max_iters
            return self._max_iters
        if getattr(runner, 'max_epochs', None) is not None:
            return runner.max_epochs
        return runner.max_iters / len(runner.data_loader)

    def progress_fraction(self, runner) -> float:
        """How far through the run, clamped to 1 so a schedule never goes past its end."""
        total = self.max_progress(runner)
        return min(self.progress(runner), total) / total

    # -- stages ------------------------------------------------------------
    def before_run(self, runner) -> None:
        self._named_optimizers = self._optimizers(runner)
        self._max_iters = None
        self._base = {name: self._base_values(name, optimizer)
                      for name, optimizer in self._named_optimizers}
        self._slots = [(name, group, base) for name, optimizer in self._named_optimizers
                       for group, base in zip(optimizer.param_groups, self._base[name])]
        self._groups = [group for _, group, _ in self._slots]
        self._regular = []
        self._regular_epoch = None
        self._warming_up = False
        self._ahead = [] if not self.by_epoch and self._function_of_progress() else None

    def before_train_epoch(self, runner) -> None:
        self._resolve_warmup_iters(runner)
        if self.by_epoch:
            self._update_regular(runner)
            self._apply(self._regular)

    def before_train_iter(self, runner) -> None:
        if self._ahead is not None:  # computed ahead: write this iteration's row
            i = runner.iter - self._ahead_start
            if not 0 <= i < len(self._ahead):
                self._compute_ahead(runner)
                i = 0
            self._regular, values = self._ahead[i]
            self._apply(values)
            return
        if self.warmup_iters is None:
            self._resolve_warmup_iters(runner)
        fresh = not self.by_epoch or runner.epoch != self._regular_epoch
        if fresh:  # every iteration; or a new epoch that had no before_train_epoch
            self._update_regular(runner)
        cur = runner.iter
        if self.warmup is not None and cur < self.warmup_iters:
            # By epoch, the warmup scales the current epoch's regular value (as mmcv).
            factor = warmup_factor(self.warmup, cur, self.warmup_iters, self.warmup_ratio)
            self._apply([v * factor for v in self._regular])
            self._warming_up = True
        elif fresh or self._warming_up:
            self._apply(self._regular)
            self._warming_up = False

    def _compute_ahead(self, runner) -> None:
        """The regular and written values of the next ``AHEAD`` iterations from ``runner.iter``."""
        self._resolve_warmup_iters(runner)
        start = runner.iter
        stop = max(start + 1, min(start + AHEAD, runner.max_iters or 0))
        at = _RunnerAt(runner)
        rows = []
        for it in range(start, stop):
            at.iter = it
            self._update_regular(at)
            regular = self._regular
            if self.warmup is not None and it < self.warmup_iters:
                factor = warmup_factor(self.warmup, it, self.warmup_iters,
                                       self.warmup_ratio)
                rows.append((regular, [v * factor for v in regular]))
            else:
                rows.append((regular, regular))
        self._ahead, self._ahead_start = rows, start

    def _function_of_progress(self) -> bool:
        """Whether the value depends on the iteration and the run's length alone (see above)."""
        for cls in type(self).__mro__:
            if any(name in vars(cls) for name in _POLICY_METHODS):
                return cls.__module__.startswith(__package__ + '.')
        return False

    # -- helpers -----------------------------------------------------------
    @staticmethod
    def _optimizers(runner) -> List[Tuple[Optional[str], Any]]:
        if isinstance(runner.optimizer, dict):
            return list(runner.optimizer.items())
        return [(None, runner.optimizer)]

    def _resolve_warmup_iters(self, runner) -> None:
        if self.warmup_iters is None:
            self.warmup_iters = self.warmup_epochs * len(runner.data_loader)

    def _update_regular(self, runner) -> None:
        scheduled = self._scheduled
        if self.reads_group:
            self._regular = [scheduled(runner, base, group) for _, group, base in self._slots]
        else:  # the value is a function of the initial value: once per distinct one
            memo: Dict[float, float] = {}
            self._regular = []
            for _, group, base in self._slots:
                if base not in memo:
                    memo[base] = scheduled(runner, base, group)
                self._regular.append(memo[base])
        self._regular_epoch = runner.epoch

    def _apply(self, values: List[float]) -> None:
        write = self._write
        for group, value in zip(self._groups, values):
            write(group, value)

    def _per_optimizer(self, values: List[float]) -> Values:
        """Flat per-slot values as ``{optimizer name: [value per group]}``."""
        out: Values = {}
        for (name, _, _), value in zip(self._slots, values):
            out.setdefault(name, []).append(value)
        return out


class _RunnerAt:
    """What a policy of mtrain's own reads of the runner, at a given iteration."""

    __slots__ = ('iter', 'epoch', 'max_iters', 'max_epochs', 'data_loader')

    def __init__(self, runner) -> None:
        self.iter = runner.iter
        self.epoch = runner.epoch
        self.max_iters = runner.max_iters
        self.max_epochs = getattr(runner, 'max_epochs', None)
        self.data_loader = runner.data_loader


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
        self._target = (minimum, ratio)
        super().__init__(**kwargs)

    def target(self, base: float) -> float:
        """Where a group whose initial value is ``base`` ends."""
        return target_value(base, *self._target)
