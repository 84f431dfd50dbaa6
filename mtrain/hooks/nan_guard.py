"""Stop (or skip) on a non-finite loss: ``nan_policy = dict(action='stop')``.

``action='stop'`` (the default, like Keras' ``TerminateOnNaN``) costs no
host sync of its own: the hook keeps references to each iteration's
(detached) loss, and every ``interval`` iterations, before any checkpoint is
written and at each epoch's end they are checked, then the run stops with an
error naming the first bad iteration and its loss terms. No checkpoint with
NaN weights is ever written, and the run stops at most ``interval - 1``
iterations after the bad one. The usual check is free: the log line reads the
same losses back to the host (the hook ``watch``-es them in the log buffer),
and a finite interval sum over all ranks clears them; only when no log line
came in an interval, or the sum is not finite (then to find the iteration),
does the hook look at the tensors itself. Under DDP the sum is every rank's,
so the ranks stop together at a log line.

``action='skip'`` switches on the optimizer step's own check
(:class:`~mtrain.step.OptimStep` ``skip_nonfinite``): each loss is tested on
the device as it is back-propagated, and a window (accumulation window, or
one iteration) with a non-finite loss is dropped whole: not applied and
counted in ``skipped_steps``. Both batch processors behave the same. Under
DDP the ranks decide together: a step is skipped on every rank when the loss
is not finite on any of them, so the weights stay identical. Where the
verdict goes follows ``GradScaler``'s rule:

- a fused optimizer (``_step_supports_amp_scaling``, see
  :mod:`mtrain.step.torch_protocol`: ``torch.optim.SGD``,
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

Either way the interval's logged ``grad_norm`` (with ``grad_clip``) is the
mean over the updates that were applied: a skipped update's norm (NaN) is
left out, whether the host or the device skipped it.

``nan_policy = None`` turns the guard off.
"""

import inspect
import math
from typing import Any, Dict, List, Optional

import torch

from ..registry import HOOKS
from ..step.torch_protocol import supports_device_skip
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
        # iteration _first (1-based); checked when `interval` of them are in.
        self._pending: List[Dict[str, Any]] = []
        self._first = 0
        self._step = None
        self._watched = None  # the log buffer whose 'loss' values this hook watches

    def before_run(self, runner) -> None:
        if self.action == 'stop' and self._watched is not runner.log_buffer:
            runner.log_buffer.watch('loss', lambda values, total: self._read_back(runner, total))
            self._watched = runner.log_buffer
        if self.action == 'skip':
            if runner.optim_step is None:
                raise ValueError("nan_policy=dict(action='skip') skips optimizer steps, but "
                                 'this run has no optimizer hook; set optimizer_config')
            runner.optim_step.skip_nonfinite = True
            self._step = runner.optim_step
            _suggest_fused(runner)

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
        if not pending:  # a new interval
            self._first = runner.iter + 1
        pending.append(log_vars)
        # Due after `interval` iterations or at the run's last, as long as the run is now.
        # At the stage's end: a log line now may read them first.
        if len(pending) >= self.interval or runner.iter + 1 == runner.max_iters:
            runner.at_stage_end(lambda: self.check(runner))

    def _read_back(self, runner, total: Optional[float]) -> None:
        """The log buffer let go of losses: read back for a log line (``total``), or dropped."""
        if runner.mode != 'train':
            return  # a val phase's losses (the training ones were checked at the epoch's end)
        if total is None:  # dropped unread (a new epoch, an evaluation): look at them here
            self.check(runner)
        elif math.isfinite(total):
            self._pending = []  # every rank's sum is finite: so is every loss in it
        else:
            self.check(runner, every_rank_finite=False)

    def before_save_checkpoint(self, runner) -> None:
        if self.action == 'stop':
            self.check(runner)

    def after_train_epoch(self, runner) -> None:
        if self.action == 'stop':
            self.check(runner)

    def check(self, runner, every_rank_finite: bool = True) -> None:
        """Raise :class:`NonFiniteLossError` if any pending loss is not finite.

        ``every_rank_finite=False``: a log line's sum over the ranks was not
        finite, so stop even if this rank's own losses all are.
        """
        pending, self._pending = self._pending, []
        if pending:
            losses = [loss if isinstance(loss, torch.Tensor) else torch.as_tensor(loss)
                      for loss in (log_vars['loss'] for log_vars in pending)]  # mmcv: floats
            try:
                finite = torch.isfinite(torch.stack(losses))
            except RuntimeError:  # a loss that is not 0-dim
                finite = torch.isfinite(torch.stack([t.reshape(()) for t in losses]))
        if not pending or bool(finite.all()):
            if not every_rank_finite:
                raise NonFiniteLossError(
                    f'the loss is not finite on another rank, at or before iteration '
                    f'{runner.iter + 1} (epoch {runner.epoch + 1}). The run was stopped before '
                    'writing any checkpoint with these weights.')
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


def _suggest_fused(runner) -> None:
    """On a GPU, say once how ``skip`` avoids its host sync per update, where it can."""
    optimizer = runner.optimizer
    if (runner.device.type != 'cuda' or supports_device_skip(optimizer)
            or 'fused' not in inspect.signature(type(optimizer).__init__).parameters):
        return
    runner.logger.info(
        f"nan_policy=dict(action='skip') reads the loss's verdict back once per update with "
        f"this {type(optimizer).__name__} (a host sync); with "
        f"optimizer=dict(type='{type(optimizer).__name__}', ..., fused=True) the step is "
        'skipped on the device instead (docs/robustness.md#non-finite-losses)')
