"""Stop (or skip) on a non-finite loss: ``nan_policy = dict(action='stop')``.

``action='stop'`` (the default, like Keras' ``TerminateOnNaN``) costs no
host sync per iteration: the hook keeps references to each iteration's
(detached) loss and checks them all at once every ``interval`` iterations and
before any checkpoint is written, then stops the run with an error naming the
first bad iteration and its loss terms. No checkpoint with NaN weights is ever
written, and the run stops at most ``interval - 1`` iterations after the bad one.

``action='skip'`` switches on the optimizer step's own check
(:class:`~mtrain.step.OptimStep` ``skip_nonfinite``): each loss is tested on
the device as it is back-propagated, and a window (accumulation window, or
one iteration) with a non-finite loss is dropped whole: not applied and
counted in ``skipped_steps``. Both batch processors behave the same. Under
DDP the ranks decide together: a step is skipped on every rank when the loss
is not finite on any of them, so the weights stay identical. Where the
verdict goes follows ``GradScaler``'s rule:

- a fused optimizer (``_step_supports_amp_scaling``: ``torch.optim.SGD``,
  ``Adam``, ``AdamW`` with ``fused=True``, on CUDA or the CPU) gets it on the
  device as ``found_inf``, as GradScaler hands it its overflow flag, and its
  kernels leave weights and state (momenta, Adam's step count) untouched: no
  host sync per update (the first update of a run excepted, see
  :class:`~mtrain.step.OptimStep`). The host does not know at once that the
  step was skipped, so ``runner.num_updates`` counts it; at the next log line
  (and at the end of the run) the skips are read back, one warning says how
  many, and ``num_updates`` is corrected. Until then, hooks that follow
  ``num_updates`` (EMA, update-counted schedules) take the skipped step for
  an update; the totals agree afterwards.
- any other optimizer cannot undo a step cheaply, so the verdict is read
  back once per update (the one sync GradScaler pays for such optimizers):
  the step is not run, not counted in ``num_updates``, and a warning is
  logged at once.

``nan_policy = None`` turns the guard off.
"""

from typing import Any, Dict, List

import torch

from ..registry import HOOKS
from .hook import Hook


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or infinite and ``nan_policy.action`` is ``'stop'``."""


@HOOKS.register_module()
class NanGuardHook(Hook):
    """Detect non-finite losses.

    Config::

        nan_policy = dict(action='stop', interval=50)   # default interval: log_config.interval
        nan_policy = dict(action='skip')

    Args:
        action: ``'stop'`` or ``'skip'``.
        interval: iterations between checks in ``'stop'`` mode.
    """

    priority = 'HIGH'  # before the OptimizerHook, so 'skip' can veto the step

    def __init__(self, action: str = 'stop', interval: int = 50) -> None:
        if action not in ('stop', 'skip'):
            raise ValueError(f"nan_policy action must be 'stop' or 'skip', got {action!r}")
        if not isinstance(interval, int) or interval <= 0:
            raise ValueError(f'nan_policy interval must be a positive integer, got {interval!r}')
        self.action = action
        self.interval = interval
        # The log_vars of consecutive iterations since the last check, the first being
        # iteration _first (1-based); checked when _due of them are in.
        self._pending: List[Dict[str, Any]] = []
        self._first = self._due = 0
        self._last_iter = None
        self._step = None

    def before_run(self, runner) -> None:
        self._last_iter = runner.max_iters
        if self.action == 'skip':
            if runner.optim_step is None:
                raise ValueError("nan_policy=dict(action='skip') skips optimizer steps, but "
                                 'this run has no optimizer hook; set optimizer_config')
            runner.optim_step.skip_nonfinite = True
            self._step = runner.optim_step

    @property
    def skipped(self) -> int:
        """Steps skipped for a non-finite loss (``action='skip'``; counted by the step).

        Reads the step's device counter back: for log lines and the end of a run.
        """
        return 0 if self._step is None else self._step.skipped_nonfinite

    def triggered_stages(self) -> List[str]:
        stages = super().triggered_stages()  # 'skip' is the step's own check: nothing to do
        return stages if self.action == 'stop' else ['before_run']

    def after_train_iter(self, runner) -> None:
        log_vars = runner.outputs.get('log_vars')
        if log_vars is None or 'loss' not in log_vars:
            return  # (no total loss: e.g. a GAN's own train_step)
        pending = self._pending
        if not pending:  # a new interval: when is it due (at the run's last iteration at most)
            self._first = runner.iter + 1
            last = self.interval if self._last_iter is None else self._last_iter - self._first + 1
            self._due = min(self.interval, last)
        pending.append(log_vars)
        if len(pending) >= self._due:
            self.check(runner)

    def before_save_checkpoint(self, runner) -> None:
        if self.action == 'stop':
            self.check(runner)

    def after_train_epoch(self, runner) -> None:
        if self.action == 'stop':
            self.check(runner)

    def check(self, runner) -> None:
        """Raise :class:`NonFiniteLossError` if any pending loss is not finite."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        losses = [loss if isinstance(loss, torch.Tensor) else torch.as_tensor(loss)  # mmcv: floats
                  for loss in (log_vars['loss'] for log_vars in pending)]
        try:
            finite = torch.isfinite(torch.stack(losses))
        except RuntimeError:  # a loss that is not 0-dim
            finite = torch.isfinite(torch.stack([t.reshape(()) for t in losses]))
        if bool(finite.all()):
            return
        first = int((~finite).nonzero()[0])
        iteration, terms = self._first + first, pending[first]
        shown = ', '.join(f'{k}={float(v):.4g}' for k, v in terms.items())
        raise NonFiniteLossError(
            f'the loss is not finite at iteration {iteration} (epoch {runner.epoch + 1}): '
            f'{shown}. The run was stopped before writing any checkpoint with these weights. '
            'Try a lower lr, warmup or grad_clip; nan_policy=dict(action=\'skip\') skips such '
            'steps instead.')

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        pass  # checkpoints before the step object kept a skip count here; it lives there now
