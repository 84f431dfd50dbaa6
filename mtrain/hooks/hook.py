"""The hook base class.

A runner calls its hooks at fixed points, in priority order (lower first)::

    before_run
    for each epoch (or, in IterBasedRunner, once around all iterations):
        before_train_epoch
        for each batch:
            before_train_iter
            batch processor: forward, losses          -> runner.outputs
                before_forward, after_forward         (around each model forward)
            after_train_iter                          (OptimizerHook: backward, step)
                before_backward, after_backward       (around each backward)
                before_optimizer_step                 (grads complete and unscaled)
        after_train_epoch
        (the same four points with ``val`` for a val workflow phase)
    after_run

    before_evaluation        (before EvalHook runs inference, e.g. to swap in EMA weights)
    after_evaluation         (after EvalHook scored the model: runner.eval_results)
    before_save_checkpoint   (whenever a checkpoint is about to be written)

``IterBasedRunner`` calls ``before_epoch`` once before its first iteration and
``after_epoch`` after its last, as mmcv 1.x does.

``before_train_epoch`` falls back to ``before_epoch`` and ``before_train_iter``
to ``before_iter`` (likewise for ``after_*`` and ``val``), as in mmcv 1.x, so a
hook that acts on both phases overrides one method.

A hook only runs at the points it overrides: the runner asks
:meth:`Hook.triggered_stages` and never calls a hook that has nothing to do,
so an idle hook costs nothing per iteration. The runner looks each method up
by name at every call, so a method replaced on the class or the instance
later is the one called; assigning a stage method on an instance (``hook.
after_train_iter = fn``) also bumps :data:`Hook.methods_version`, on which
the runner keys which hooks it calls at which stage.

A hook with state worth keeping across a resume (a schedule position, the
best metric so far, a buffer) returns it from :meth:`state_dict`; the runner
stores it in the checkpoint under the hook's name and gives it back through
:meth:`load_state_dict`.

Hooks read these runner attributes: ``model`` (as the user passed it),
``model_wrapper`` (what the steps call; ``.module`` is the user's model),
``optimizer``, ``data_loader``,
``outputs``, ``epoch``, ``iter``, ``inner_iter``, ``num_updates``,
``max_epochs``, ``max_iters``, ``log_buffer``, ``work_dir``, ``logger``,
``rank``, ``world_size``, ``meta``, and ``optim_step`` (the run's
:class:`~mtrain.step.OptimStep`: loss scaler, accumulation window, skip counts).
"""

from typing import Any, Dict, List

#: Every point a runner calls, in the order of a run.
STAGES = (
    'before_run', 'before_epoch', 'before_train_epoch', 'before_train_iter', 'before_forward',
    'after_forward', 'before_backward', 'after_backward', 'before_optimizer_step',
    'after_train_iter', 'after_train_epoch', 'before_val_epoch', 'before_val_iter',
    'after_val_iter', 'after_val_epoch', 'after_epoch', 'before_evaluation', 'after_evaluation',
    'before_save_checkpoint', 'after_run')

#: mmcv 1.x's ``Hook.stages``: what :meth:`Hook.get_triggered_stages` reports.
MMCV_STAGES = (
    'before_run', 'before_train_epoch', 'before_train_iter', 'after_train_iter',
    'after_train_epoch', 'before_val_epoch', 'before_val_iter', 'after_val_iter',
    'after_val_epoch', 'after_run')

# Which generic method each stage falls back to (mmcv 1.x semantics).
_FALLBACK = {
    'before_train_epoch': 'before_epoch', 'after_train_epoch': 'after_epoch',
    'before_val_epoch': 'before_epoch', 'after_val_epoch': 'after_epoch',
    'before_train_iter': 'before_iter', 'after_train_iter': 'after_iter',
    'before_val_iter': 'before_iter', 'after_val_iter': 'after_iter',
}


#: The names a runner calls: every stage and the generic methods they fall back to.
_DISPATCH_NAMES = frozenset(STAGES) | frozenset(_FALLBACK.values())


class Hook:
    """Base class of all hooks; override the points you need."""

    #: Default priority used when the config does not give one.
    priority = 'NORMAL'
    #: Every stage a runner calls (mmcv's ``Hook.stages`` holds its 10 of them).
    stages = STAGES
    #: Bumped whenever a stage method is assigned to (or deleted from) a hook
    #: instance: the runners rebuild which hooks act at which stage.
    methods_version = 0

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name in _DISPATCH_NAMES:
            Hook.methods_version += 1

    def __delattr__(self, name: str) -> None:
        object.__delattr__(self, name)
        if name in _DISPATCH_NAMES:
            Hook.methods_version += 1

    def before_run(self, runner) -> None:
        pass

    def after_run(self, runner) -> None:
        pass

    def before_epoch(self, runner) -> None:
        pass

    def after_epoch(self, runner) -> None:
        pass

    def before_iter(self, runner) -> None:
        pass

    def after_iter(self, runner) -> None:
        pass

    def before_train_epoch(self, runner) -> None:
        self.before_epoch(runner)

    def before_val_epoch(self, runner) -> None:
        self.before_epoch(runner)

    def after_train_epoch(self, runner) -> None:
        self.after_epoch(runner)

    def after_val_epoch(self, runner) -> None:
        self.after_epoch(runner)

    def before_train_iter(self, runner) -> None:
        self.before_iter(runner)

    def before_val_iter(self, runner) -> None:
        self.before_iter(runner)

    def after_train_iter(self, runner) -> None:
        self.after_iter(runner)

    def after_val_iter(self, runner) -> None:
        self.after_iter(runner)

    # The points inside a training iteration. A batch processor that runs several
    # batches per step (MultiBatchProcessor) calls the first four once per batch;
    # it exposes the batch being processed as ``runner.batch_processor.current``.
    def before_forward(self, runner) -> None:
        pass

    def after_forward(self, runner) -> None:
        pass

    def before_backward(self, runner) -> None:
        pass

    def after_backward(self, runner) -> None:
        pass

    def before_optimizer_step(self, runner) -> None:
        """Called once the step's gradients are complete (unscaled under fp16), before clipping."""

    def before_evaluation(self, runner) -> None:
        """Called before an evaluation hook runs inference."""

    def after_evaluation(self, runner) -> None:
        """Called after an evaluation hook scored the model (``runner.eval_results``)."""

    def before_save_checkpoint(self, runner) -> None:
        """Called before any checkpoint is written (a last chance to veto it)."""

    # -- state ------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        """State to store in a checkpoint; empty for a stateless hook."""
        return {}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""

    # -- helpers for hooks ------------------------------------------------
    # The helpers below are mmcv 1.x's (``epoch``, ``iter``, ``inner_iter`` count from 0,
    # so "every 2 epochs" is true after epochs 2, 4, ...; ``n <= 0`` is never).
    @staticmethod
    def every_n_epochs(runner, n: int) -> bool:
        return n > 0 and (runner.epoch + 1) % n == 0

    @staticmethod
    def every_n_inner_iters(runner, n: int) -> bool:
        return n > 0 and (runner.inner_iter + 1) % n == 0

    @staticmethod
    def every_n_iters(runner, n: int) -> bool:
        return n > 0 and (runner.iter + 1) % n == 0

    @staticmethod
    def end_of_epoch(runner) -> bool:
        return runner.inner_iter + 1 == len(runner.data_loader)

    @staticmethod
    def is_last_epoch(runner) -> bool:
        return runner.epoch + 1 == runner.max_epochs

    @staticmethod
    def is_last_iter(runner) -> bool:
        return runner.iter + 1 == runner.max_iters

    def _overrides(self, method: str) -> bool:
        if method in getattr(self, '__dict__', ()):  # assigned on the instance
            return True
        return getattr(type(self), method, None) is not getattr(Hook, method, None)

    def triggered_stages(self) -> List[str]:
        """The stages at which this hook does something (overrides a method)."""
        return [s for s in STAGES
                if self._overrides(s) or (s in _FALLBACK and self._overrides(_FALLBACK[s]))]

    def get_triggered_stages(self) -> List[str]:
        """mmcv 1.x's answer: which of its 10 stages (``MMCV_STAGES``) this hook acts at.

        Overriding ``before_epoch`` counts as ``before_train_epoch`` and
        ``before_val_epoch``, and so on, as in mmcv; mtrain's extra stages
        are in :meth:`triggered_stages`.
        """
        stages = self.triggered_stages()
        return [s for s in MMCV_STAGES if s in stages]

    def name_for(self, stage: str) -> str:
        """The name of the method that does this hook's work at ``stage``.

        ``before_train_iter`` of a hook that only overrides ``before_iter`` is
        its ``before_iter`` itself: the runner calls it without the fallback
        hop. The runner looks the name up at every call (never a bound method
        kept from registration), so a method replaced later is the one called.
        """
        fallback = _FALLBACK.get(stage)
        if fallback is not None and not self._overrides(stage):
            return fallback
        return stage

    def method_for(self, stage: str):
        """The bound method that does this hook's work at ``stage`` (looked up now)."""
        return getattr(self, self.name_for(stage))


def periodic_stages(hook: Hook, by_epoch: bool) -> List[str]:
    """``triggered_stages`` of a hook that acts after epochs or after iterations.

    A checkpoint or evaluation hook counting epochs has nothing to do after an
    iteration (and vice versa), so it is not called there at all.
    """
    idle = 'after_train_iter' if by_epoch else 'after_train_epoch'
    return [stage for stage in Hook.triggered_stages(hook) if stage != idle]
