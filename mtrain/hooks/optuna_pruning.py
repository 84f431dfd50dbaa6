"""Report each evaluation to an Optuna trial and stop the run when the trial should be pruned.

``tools/sweep.py`` adds this hook to every trial it runs (docs/sweeps.md); the
trial's command line carries it, so re-running that command reproduces the trial::

    custom_hooks = [dict(type='OptunaPruningHook', storage='sqlite:////abs/sweep.db',
                         study_name='lenet_digits', trial_number=3, monitor='accuracy',
                         pruner='median')]

Optuna is imported when the hook is built, not when ``mtrain.hooks`` is: a run
without a sweep never pays for it, and Optuna stays an optional extra
(``pip install 'mtrain[sweep]'``).
"""

import importlib
from typing import Any, Dict, Optional

from ..registry import HOOKS
from ..utils import ConfigError, broadcast_object
from .evaluation import EvalHook
from .hook import Hook

#: ``--pruner`` names and Optuna's classes.
PRUNERS = {'median': 'MedianPruner', 'hyperband': 'HyperbandPruner', 'none': 'NopPruner'}


def import_optuna() -> Any:
    """The ``optuna`` module, or a :class:`ConfigError` that says how to install it."""
    try:
        return importlib.import_module('optuna')
    except ImportError as e:
        raise ConfigError("sweeps need Optuna: pip install optuna (or pip install "
                          "'mtrain[sweep]')") from e


def build_pruner(name: str, args: Optional[Dict[str, Any]] = None) -> Any:
    """An Optuna pruner by ``--pruner`` name, with keyword ``args`` (e.g. ``n_startup_trials``)."""
    if name not in PRUNERS:
        raise ConfigError(f"unknown pruner '{name}'; choose one of {', '.join(PRUNERS)}",
                          key='pruner')
    cls = getattr(import_optuna().pruners, PRUNERS[name])
    try:
        return cls(**(args or {}))
    except TypeError as e:
        raise ConfigError(f'{PRUNERS[name]} does not take these arguments: {e}',
                          key='pruner_args') from e


def open_storage(url: str) -> Any:
    """Optuna's RDB storage for ``url``; SQLite waits for a lock instead of failing at once.

    Several processes (the sweep's workers and each trial's hook) write one SQLite
    file; SQLite's default 5 s busy timeout is short on a loaded machine.
    """
    optuna = import_optuna()
    engine_kwargs = {'connect_args': {'timeout': 300}} if url.startswith('sqlite') else None
    return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs)


@HOOKS.register_module()
class OptunaPruningHook(Hook):
    """After each evaluation, report ``monitor`` to the trial; stop cleanly when it is pruned.

    Only rank 0 talks to the study; its verdict is broadcast, so every rank of a
    distributed trial stops after the same evaluation. A pruned run ends like an
    early-stopped one: that epoch's checkpoint and logs are written, and the
    trial gets the user attribute ``pruned_at_step`` (the sweep then marks it
    pruned). The step is the epoch (or iteration) the evaluation followed, as
    ``EvalHook`` counts it.

    When the trial has already finished (the command is re-run to reproduce
    it), nothing is reported: a trial that was pruned stops at the step where
    it was pruned, and one that completed runs to its end.

    Args:
        storage: the study's database URL (``sqlite:///...``, ``postgresql://...``).
        study_name: the Optuna study.
        trial_number: the trial's number in the study.
        monitor: the metric reported (a key of ``runner.eval_results``).
        pruner: ``'median'``, ``'hyperband'`` or ``'none'``.
        pruner_args: keyword arguments of the pruner class.
    """

    priority = 'LOW'  # after EvalHook's own after_evaluation work

    def __init__(self, storage: str, study_name: str, trial_number: int,
                 monitor: str = 'accuracy', pruner: str = 'median',
                 pruner_args: Optional[Dict[str, Any]] = None) -> None:
        self.storage = storage
        self.study_name = study_name
        self.trial_number = trial_number
        self.monitor = monitor
        self.pruner = build_pruner(pruner, pruner_args)
        self.pruned_at: Optional[int] = None
        self._trial: Any = None
        self._replay_stop: Optional[int] = None  # a finished trial: where it stopped

    def before_run(self, runner) -> None:
        if self.pruned_at is not None:  # resumed from the checkpoint of the pruned step
            runner.should_stop = True
        if runner.rank == 0:
            self._open_trial(runner)

    def _open_trial(self, runner) -> None:
        optuna = import_optuna()
        storage = open_storage(self.storage)
        study = optuna.load_study(study_name=self.study_name, storage=storage, pruner=self.pruner)
        trial_id = storage.get_trial_id_from_study_id_trial_number(
            storage.get_study_id_from_name(self.study_name), self.trial_number)
        frozen = storage.get_trial(trial_id)
        if frozen.state.is_finished():
            if frozen.state == optuna.trial.TrialState.PRUNED and frozen.intermediate_values:
                self._replay_stop = max(frozen.intermediate_values)
            runner.logger.info(f'trial {self.trial_number} of study {self.study_name} has '
                               f'finished ({frozen.state.name}): this run reports nothing')
            return
        self._trial = optuna.trial.Trial(study, trial_id)

    def after_evaluation(self, runner) -> None:
        prune = False
        if runner.rank == 0:
            prune = self._report(runner, self._step(runner))
        if broadcast_object(prune):
            self.pruned_at = self._step(runner)
            runner.should_stop = True

    def _report(self, runner, step: int) -> bool:
        """Rank 0: report the metric; whether the trial is to stop here."""
        if self._trial is None:
            return self._replay_stop is not None and step >= self._replay_stop
        value = runner.eval_results.get(self.monitor)
        if not isinstance(value, (int, float)):
            raise ConfigError(f"the sweep's metric '{self.monitor}' is not among the evaluation "
                              f'results {sorted(runner.eval_results)}; pass one of them as '
                              '--metric')
        self._trial.report(float(value), step)
        if not self._trial.should_prune():
            return False
        self._trial.set_user_attr('pruned_at_step', step)
        runner.logger.info(f'trial {self.trial_number} pruned at step {step} '
                           f'({self.monitor} {value:.4f}): stopping')
        return True

    @staticmethod
    def _step(runner) -> int:
        """The epoch (or iteration) just evaluated, counted from 1 as ``EvalHook`` names it."""
        by_epoch = next((h.by_epoch for h in runner.hooks if isinstance(h, EvalHook)), True)
        return runner.epoch + 1 if by_epoch else runner.iter + 1

    def state_dict(self) -> Dict[str, Any]:
        return {'pruned_at': self.pruned_at}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.pruned_at = state.get('pruned_at')
