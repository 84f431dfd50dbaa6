"""One optimizer update, in execution order, from four pieces a reader can hold.

Every optimizer hook and every batch processor drives the same
:class:`OptimStep`; one training iteration is::

    output = model.train_step(batch)            # the batch processor (under autocast)
    step.backward(loss, iteration)              # ÷ window length, × loss scale, backward
    if step.ends_window(iteration):             # the last iteration of an accumulation window
        step.unscale_()                         # .grad holds the true gradients from here on
        result = step.update()                  # verdict → clip → step → scale update → zero_grad

The pieces: :class:`~.window.AccumulationWindow` (which iteration steps, what
it divides by: from the window's start and the run's end as it stands now),
:class:`~.verdict.Verdict` (skipped or not, on the host or the device),
:mod:`.update` (clip and step, reading ``optimizer.param_groups`` at the
step) and :mod:`.window_grads` (a half-finished window into a checkpoint).
The step knows nothing of runners or hooks: the caller gives it the run's
end as a function (asked at each iteration), calls the hook points around
it and records ``result``. A skip decided on the device is learnt from
:meth:`OptimStep.take_device_skips` at the next log line.
"""

from typing import Any, Callable, Dict, List, Optional

import torch
from torch import nn

from ..utils.autograd import log_unused_parameters
from .amp import parse_dtype, parse_loss_scale
from .grad_norm import GradNormMeter
from .micro_batch import MicroBatchSize
from .skip_counter import SkipCounter
from .torch_protocol import supports_device_skip
from .update import (STEPPED, ScaledStep, UpdateResult, clip_by_norm, params_in_model_order,
                     step_plain)
from .verdict import APPLIED, LossWatch
from .window import AccumulationWindow
from .window_grads import (Grads, gather_window_grads, grads_for_this_rank, optimizer_params,
                           restore_window_grads, window_grads)


def check_grad_clip(grad_clip: Any) -> Optional[Dict[str, Any]]:
    """``grad_clip`` if it is None or a dict (``clip_grad_norm_``'s arguments), else TypeError."""
    if grad_clip is not None and not isinstance(grad_clip, dict):
        raise TypeError(f'grad_clip must be None or a dict such as dict(max_norm=35), '
                        f'got {grad_clip!r}')
    return grad_clip


class OptimStep:
    """Backward, accumulation window, loss scaling, clipping and the optimizer step.

    Args:
        grad_clip: ``torch.nn.utils.clip_grad_norm_`` arguments, e.g.
            ``dict(max_norm=35, norm_type=2)``; applied to unscaled gradients.
        cumulative_iters: iterations whose gradients add up before one update
            (see :class:`~.window.AccumulationWindow`).
        amp_dtype: ``'float16'``/``'bfloat16'`` for autocast, None for fp32.
        loss_scale: with float16: a number (static), ``'dynamic'`` or a dict
            of ``GradScaler`` arguments; None for no scaling (fp32, bf16).
        detect_anomalous_params: log each parameter the loss does not depend
            on, at every backward (slow; for debugging DDP's unused parameters).
        micro_batch: ``'auto'``, a fixed size or None (off): the batch
            processor runs each batch as micro-batches of this many samples
            (see :mod:`.micro_batch`); the size found is in :meth:`state_dict`.

    ``skip_nonfinite`` (``nan_policy=dict(action='skip')``): a window whose
    loss was not finite on any rank is dropped whole. Under loss scaling
    GradScaler's overflow check does this (non-finite loss, non-finite grads).
    An optimizer that can skip on the device (torch's ``fused=True`` SGD,
    Adam, AdamW) gets the verdict there, with no host sync; any other one has
    it read back once per update and is not stepped. The first update of a
    run is always read back: fused SGD's momentum buffers are created
    uninitialised by a step skipped on the device.

    Assumes nothing fixed for the run: the parameters and param groups are
    read from ``optimizer`` at each update (the optimizer hook sets
    ``optimizer`` to ``runner.optimizer`` before each, so even a replaced
    optimizer is followed), the run's end at each iteration (``run_end``),
    the world size at each checkpoint.
    """

    def __init__(self, grad_clip: Optional[Dict[str, Any]] = None, cumulative_iters: int = 1,
                 amp_dtype: Any = None, loss_scale: Any = None,
                 detect_anomalous_params: bool = False, micro_batch: Any = None) -> None:
        self.grad_clip = check_grad_clip(grad_clip)
        self.micro_batch = MicroBatchSize(micro_batch)
        self.window = AccumulationWindow(cumulative_iters)
        self.amp_dtype = None if amp_dtype is None else parse_dtype(amp_dtype)
        self.scaled_step = None if loss_scale is None else ScaledStep(
            *parse_loss_scale(loss_scale))
        self.detect_anomalous_params = detect_anomalous_params
        self.skip_nonfinite = False
        self.overflow_skips = SkipCounter()  # updates GradScaler skipped (inf/NaN gradients)
        self.nonfinite_skips = SkipCounter()  # windows dropped for a non-finite loss
        self.grad_norms = GradNormMeter()  # used when updates can be skipped (see record)
        self.losses = LossWatch()
        self.optimizer: Optional[torch.optim.Optimizer] = None
        self.model: Optional[nn.Module] = None
        self.logger = None
        self.run_end: Callable[[], Optional[int]] = lambda: None
        self.clip: Callable[[], Optional[torch.Tensor]] = self._clip_optimizer_params
        self.ask_divisor: Optional[Callable[[int], int]] = None  # see setup
        self.detect: Callable[[torch.Tensor], None] = self._log_unused  # see setup
        self._gathered: Optional[List[Grads]] = None
        self._pending: Dict[str, Any] = {}
        self._applied = False  # an update of this run is known to have been applied

    @property
    def cumulative_iters(self) -> int:
        return self.window.length

    @property
    def scaler(self) -> Optional[torch.amp.GradScaler]:
        return None if self.scaled_step is None else self.scaled_step.scaler

    def use_scaler(self, scaler: torch.amp.GradScaler) -> None:
        """Scale, unscale and step with ``scaler`` (an mmcv 1.x hook's own ``loss_scaler``)."""
        if self.scaled_step is None:  # (bf16 or full precision until now: dynamic scaling)
            self.scaled_step = ScaledStep({}, None)
        self.scaled_step.use(scaler)

    @property
    def can_skip(self) -> bool:
        """Whether an update may be skipped (then ``grad_norm`` goes through ``grad_norms``)."""
        return self.skip_nonfinite or self.scaled_step is not None

    # -- the run -------------------------------------------------------------
    def setup(self, optimizer: torch.optim.Optimizer, device: torch.device,
              model: Optional[nn.Module] = None, logger: Any = None,
              run_end: Optional[Callable[[], Optional[int]]] = None,
              clip: Optional[Callable[[], Optional[torch.Tensor]]] = None,
              ask_divisor: Optional[Callable[[int], int]] = None,
              detect: Optional[Callable[[torch.Tensor], None]] = None) -> None:
        """Bind the optimizer, the user's model and the run's end; restore a resumed state.

        ``run_end()``: one past the run's last iteration as the run stands
        when asked (None: unknown), see :class:`~.window.AccumulationWindow`.
        ``clip()``: clips the gradients with ``grad_clip`` and returns the norm
        before clipping; the caller says which parameters, in which order (the
        optimizer hooks: mmcv's or mmengine's). Default: the optimizer's
        parameters in the model's order. ``ask_divisor(iteration)``: what that
        iteration's loss is divided by, asked at every backward in place of
        the window (a 1.x subclass's own ``_get_loss_factor``); None: the
        window's answer. ``detect(loss)``: what ``detect_anomalous_params``
        does at each backward (default: log the parameters ``loss`` skips).
        """
        self.optimizer, self.model, self.logger = optimizer, model, logger
        self.run_end = run_end or (lambda: None)
        self.clip = clip or self._clip_optimizer_params
        self.ask_divisor = ask_divisor
        self.detect = detect or self._log_unused
        self._applied = False
        first = next(optimizer_params(optimizer), None)
        for counter in (self.overflow_skips, self.nonfinite_skips):
            counter.place(device if first is None else first.device)
        if self.scaled_step is not None:
            self.scaled_step.start(device)
        optimizer.zero_grad(set_to_none=True)
        pending, self._pending = self._pending, {}
        if pending:
            self.load_state_dict(pending)

    def teardown(self) -> None:
        if self.scaled_step is not None:
            self.scaled_step.stop()

    # -- skip counts ---------------------------------------------------------
    @property
    def skipped_overflow(self) -> int:
        """Updates GradScaler skipped (reads the device counter: ask at log lines, not per step)."""
        return self.overflow_skips.value()

    @skipped_overflow.setter
    def skipped_overflow(self, count: int) -> None:
        self.overflow_skips.set(count)

    @property
    def skipped_nonfinite(self) -> int:
        """Windows dropped for a non-finite loss (reads the device counter, as above)."""
        return self.nonfinite_skips.value()

    @skipped_nonfinite.setter
    def skipped_nonfinite(self, count: int) -> None:
        self.nonfinite_skips.set(count)

    def take_device_skips(self) -> Dict[str, int]:
        """``{'overflow': n, 'nonfinite': m}``: skips decided on the device since the last call."""
        return {'overflow': self.overflow_skips.take_new(),
                'nonfinite': self.nonfinite_skips.take_new()}

    # -- the accumulation window ---------------------------------------------
    def ends_window(self, iteration: int) -> bool:
        """Whether iteration ``iteration`` (0-based) ends with an optimizer update."""
        return self.window.length == 1 or self.window.ends(iteration, self.run_end())

    def loss_divisor(self, iteration: int) -> int:
        """What iteration ``iteration``'s loss is divided by (its window's length)."""
        if self.ask_divisor is not None:
            return self.ask_divisor(iteration)
        return self.window.divisor(iteration, self.run_end())

    @property
    def window_in_progress(self) -> bool:
        """Whether gradients of an unfinished window are waiting in ``.grad``."""
        return self.optimizer is not None and any(
            p.grad is not None for p in optimizer_params(self.optimizer))

    # -- the step, in execution order ----------------------------------------
    def backward(self, loss: torch.Tensor, iteration: int) -> None:
        """Back-propagate ``loss`` ÷ the window length, times the loss scale."""
        if self.detect_anomalous_params:
            self.detect(loss)
        if self.skip_nonfinite and self.scaled_step is None:
            self.losses.observe(loss)  # stays on the device; decided at the update
        if self.window.length != 1 or self.ask_divisor is not None:
            loss = loss / self.loss_divisor(iteration)
        if self.scaled_step is not None:
            loss = self.scaled_step.scaler.scale(loss)
        loss.backward()

    def unscale_(self) -> None:
        """Divide the gradients by the loss scale (nothing to do without one)."""
        if self.scaled_step is not None:
            self.scaled_step.scaler.unscale_(self.optimizer)

    def update(self) -> UpdateResult:
        """Verdict on the losses → clip → step (through the scaler) → zero_grad."""
        optimizer = self.optimizer
        if not self.skip_nonfinite and self.grad_clip is None and self.scaled_step is None:
            optimizer.step()  # the common case: nothing to decide, clip or scale
            optimizer.zero_grad(set_to_none=True)
            self._applied = True
            return STEPPED
        verdict = APPLIED
        if self.skip_nonfinite and self.scaled_step is None:
            verdict = self.losses.verdict(on_device=self._applied
                                          and supports_device_skip(optimizer))
            if verdict.skipped:
                optimizer.zero_grad(set_to_none=True)  # the whole window is dropped
                self.nonfinite_skips.add_known()
                return UpdateResult(verdict, None, 'the loss was not finite')
        grad_norm = self.clip() if self.grad_clip is not None else None
        if self.scaled_step is not None:
            verdict, counter = self.scaled_step.step(optimizer), self.overflow_skips
        else:
            step_plain(optimizer, verdict)
            counter = self.nonfinite_skips
        optimizer.zero_grad(set_to_none=True)
        if verdict.on_device:
            counter.add_on_device(verdict.flag)
            return UpdateResult(verdict, grad_norm)
        if verdict.skipped:
            counter.add_known()
            return UpdateResult(verdict, None, 'inf/NaN gradients')  # its norm is inf
        self._applied = True
        return STEPPED if grad_norm is None else UpdateResult(verdict, grad_norm)

    def _log_unused(self, loss: torch.Tensor) -> None:
        """The default ``detect``: one error line per parameter ``loss`` does not depend on."""
        log_unused_parameters(loss, self.model, self.logger)

    def _clip_optimizer_params(self) -> Optional[torch.Tensor]:
        """The default ``clip``: the optimizer's parameters, in the model's order."""
        return clip_by_norm(params_in_model_order(self.optimizer, self.model), self.grad_clip)

    # -- state ---------------------------------------------------------------
    def gather_window(self) -> None:
        """The first part of writing a checkpoint, on every rank (a collective).

        Collects every rank's half-accumulated gradients for the next
        :meth:`state_dict`, which uses them once. Nothing to do outside a
        window or in one process.
        """
        self._gathered = (None if self.optimizer is None
                          else gather_window_grads(self.optimizer, self.model))

    def state_dict(self) -> Dict[str, Any]:
        """Scaler, skip counts, logged norms, a half-finished window's gradients (empty if none)."""
        state: Dict[str, Any] = {}
        if self.scaler is not None:
            state['scaler'] = self.scaler.state_dict()
        elif self._pending.get('scaler'):
            state['scaler'] = self._pending['scaler']
        self.overflow_skips.save(state, 'skipped_steps')
        self.nonfinite_skips.save(state, 'skipped_nonfinite')
        state.update(self.grad_norms.state_dict())
        state.update(self.micro_batch.state_dict())
        gathered, self._gathered = self._gathered, None
        grads = {} if self.optimizer is None else window_grads(self.optimizer, self.model)
        if grads:  # resuming inside a window must see the same sums
            state['grads'] = grads
            if gathered is not None:
                state['grads_by_rank'] = gathered
            state.update(self.losses.state_dict())
        return state

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.overflow_skips.load(state, 'skipped_steps')
        self.nonfinite_skips.load(state, 'skipped_nonfinite')
        self.grad_norms.load_state_dict(state)
        if self.optimizer is None:  # resumed before the run started: applied in setup
            self._pending = dict(state)
            return
        self.micro_batch.load_state_dict(state, self.logger)
        if self.scaler is not None and state.get('scaler'):
            self.scaler.load_state_dict(state['scaler'])
        restore_window_grads(grads_for_this_rank(state, self.logger), self.optimizer, self.model)
        first = next(optimizer_params(self.optimizer), None)
        if first is not None:
            self.losses.load_state_dict(state, first.device)
