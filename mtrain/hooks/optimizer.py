"""The optimizer hooks: mmcv 1.x's config names for one :class:`~mtrain.step.OptimStep`.

Config (mmcv 1.x keys)::

    optimizer_config = dict(grad_clip=dict(max_norm=35, norm_type=2))
    optimizer_config = dict(type='GradientCumulativeOptimizerHook', cumulative_iters=4)
    fp16 = dict(loss_scale='dynamic')   # OptimizerHook becomes Fp16OptimizerHook (see fp16.py)

Each hook only configures its step object (``hook.optim_step``, also
``runner.optim_step``) and calls it at ``after_train_iter``; the whole update,
in execution order, is :class:`~mtrain.step.OptimStep`. Every real update adds
one to ``runner.num_updates``; an accumulation micro-step or a skipped step
does not. A step that a fused optimizer may have skipped on the device
(``nan_policy`` skip, or fp16's GradScaler) is counted as an update when it
runs; the skips are read back at the next log line (and at the end of the
run), which logs one warning for them and takes them off ``num_updates``.
"""

from typing import Any, Dict, Iterable, Optional, Union

import torch
from torch import nn

from ..registry import HOOKS
from ..step import (STEPPED, AccumulationWindow, OptimStep, UpdateResult,
                    check_autocast_support, check_grad_clip)
from ..step.micro_batch import is_out_of_memory, out_of_memory_stop
from ..step.update import clip_by_norm, params_in_model_order
from ..utils.autograd import log_unused_parameters
from ..utils.modules import wrap_fp16_model
from .hook import Hook
from .micro_batch_checks import check_micro_batching
from .run_length import run_end


@HOOKS.register_module()
class OptimizerHook(Hook):
    """Backward the processor's ``loss`` and step the optimizer every iteration.

    One iteration, as this hook runs it at ``after_train_iter``::

        if not runner.batch_processor.does_backward:    # else the processor did it
            before_backward;  step.backward(outputs['loss'], iter);  after_backward
        if step.ends_window(iter):
            step.unscale_();  before_optimizer_step;  step.update()   # clip, step, zero_grad

    Args:
        grad_clip: arguments of ``torch.nn.utils.clip_grad_norm_`` (e.g.
            ``dict(max_norm=35, norm_type=2)``); the norm before clipping is
            logged as ``grad_norm`` (on the device until the log interval).
        detect_anomalous_params: log every parameter that took no part in
            producing the loss (slow: walks the autograd graph; debug only).
        clip_params: whose gradients ``grad_clip`` clips, summed in which order
            (the order moves the norm's last bits). ``'model'`` (mmcv 1.7.2):
            :meth:`clip_grads` of ``runner.model.parameters()``, every
            trainable parameter holding a gradient, in the model's order,
            whether the optimizer holds it or not. ``'optimizer'`` (mmengine
            0.10, set for mmengine-schema configs): the optimizer's
            parameters in the model's order (mmengine's one group per
            parameter), however mtrain merged the groups. Default: ``'model'``.
        micro_batch: out-of-memory recovery (docs/robustness.md). ``'auto'``:
            a batch whose forward or backward runs out of device memory is
            run again, the same samples, as micro-batches half the size
            (down to 1 sample), with the same update; the size found is kept,
            logged and checkpointed. An integer: always micro-batches of that
            many samples. None (default): an out-of-memory error stops the run
            with one line. Needs ``BasicBatchProcessor`` or
            ``MultiBatchProcessor`` (they then back-propagate) and, on several
            processes, DDP.

    Subclassing as in mmcv 1.x: a subclass may skip ``OptimizerHook.__init__``
    and set ``self.grad_clip`` (and the other arguments) itself; the step
    object is made at first use. It may override :meth:`clip_grads`. It may
    override ``after_train_iter`` and back-propagate and call
    ``runner.optimizer.step()`` itself: every ``optimizer.step()`` is then
    counted in ``runner.num_updates`` (a step hook on the optimizer, from
    ``before_run`` to ``after_run``), so hooks that follow updates (EMA,
    update-counted schedules) see its steps. mmcv's
    ``GradientCumulativeOptimizerHook`` points are on every optimizer hook
    here (each can accumulate): an override of :meth:`_get_loss_factor` is
    what the step divides each loss by; :meth:`_init` runs in ``before_run``
    and sets ``divisible_iters``, ``remainder_iters`` and ``initialized``.
    """

    priority = 'ABOVE_NORMAL'
    _settles_at_log_lines = False
    _optim_step: Optional[OptimStep] = None  # made at first use for a subclass without __init__
    _counts_own_steps = False  # after_train_iter overridden: optimizer.step() is counted
    _step_counter = None  # the optimizer step hook that counts them
    # mmcv 1.x GradientCumulativeOptimizerHook's attributes, set by _init (see there)
    initialized = False
    divisible_iters = 0
    remainder_iters = 0
    #: See the class docstring; an instance attribute once set.
    clip_params = 'model'

    def __init__(self, grad_clip: Optional[Dict[str, Any]] = None,
                 detect_anomalous_params: bool = False, clip_params: str = 'model',
                 micro_batch: Union[str, int, None] = None) -> None:
        self._optim_step = OptimStep(grad_clip=grad_clip,
                                     detect_anomalous_params=detect_anomalous_params,
                                     micro_batch=micro_batch)
        self.clip_params = _checked_clip_params(clip_params)

    @property
    def optim_step(self) -> OptimStep:
        """The step this hook configures and drives (also ``runner.optim_step``)."""
        step = self._optim_step
        if step is None:  # a 1.x subclass that set its attributes without __init__
            step = self._optim_step = self._default_step()
        return step

    def _default_step(self) -> OptimStep:
        """The step of a hook whose ``__init__`` never ran: the class's defaults."""
        return OptimStep()

    # What mmcv 1.x code reads off the hook and sets on it (a subclass's __init__ does).
    @property
    def grad_clip(self) -> Optional[Dict[str, Any]]:
        return self.optim_step.grad_clip

    @grad_clip.setter
    def grad_clip(self, value: Optional[Dict[str, Any]]) -> None:
        self.optim_step.grad_clip = check_grad_clip(value)

    @property
    def detect_anomalous_params(self) -> bool:
        return self.optim_step.detect_anomalous_params

    @detect_anomalous_params.setter
    def detect_anomalous_params(self, value: bool) -> None:
        self.optim_step.detect_anomalous_params = bool(value)

    @property
    def cumulative_iters(self) -> int:
        return self.optim_step.cumulative_iters

    @cumulative_iters.setter
    def cumulative_iters(self, value: int) -> None:
        self.optim_step.window = AccumulationWindow(value)

    @property
    def scaler(self):
        return self.optim_step.scaler

    @property
    def skipped_steps(self) -> int:
        return self.optim_step.skipped_overflow + self.optim_step.skipped_nonfinite

    def clip_grads(self, params: Iterable[nn.Parameter]) -> Optional[torch.Tensor]:
        """mmcv 1.x's override point: clip ``params`` with ``grad_clip``; the norm before.

        Only the trainable parameters holding a gradient count; None if none does.
        """
        return clip_by_norm(params, self.grad_clip)

    def detect_anomalous_parameters(self, loss: torch.Tensor, runner) -> None:
        """mmcv 1.x's: log an error for each trainable parameter ``loss`` does not depend on.

        What ``detect_anomalous_params=True`` does before each backward (a
        subclass's override is called there); rank-local. Walks the autograd
        graph: slow, for debugging DDP's unused parameters.
        """
        log_unused_parameters(loss, runner.model, runner.logger)

    def _clip(self, runner) -> Optional[torch.Tensor]:
        """The step's ``clip``: :meth:`clip_grads` over the parameters ``clip_params`` names."""
        if self.clip_params == 'optimizer':
            return self.clip_grads(params_in_model_order(runner.optimizer,
                                                         runner.model_wrapper.module))
        return self.clip_grads(runner.model.parameters())

    def will_step(self, runner) -> bool:
        """Whether this iteration ends with an optimizer update (else: no grad sync)."""
        return self.optim_step.ends_window(runner.iter)

    def loss_factor(self, runner) -> int:
        """What this iteration's loss is divided by before backward (accumulation)."""
        return self.optim_step.loss_divisor(runner.iter)

    # -- mmcv 1.x GradientCumulativeOptimizerHook's override points (every hook here accumulates)
    def _init(self, runner) -> None:
        """Warn about a resume inside a window and about BatchNorm; split the run (rank-local).

        Sets mmcv's ``divisible_iters`` (iterations in whole windows),
        ``remainder_iters`` (those of the shorter last window), both from the
        run's end as it stands (:func:`run_end`), and ``initialized``. Called
        in ``before_run``, so a 1.x subclass's own ``after_train_iter`` that
        starts with ``if not self.initialized: self._init(runner)`` finds it done.
        """
        if self.cumulative_iters > 1:
            self._warn_about_accumulation(runner)
        end, length = run_end(runner), self.cumulative_iters
        self.remainder_iters = 0 if end is None else end % length
        self.divisible_iters = 0 if end is None else end - self.remainder_iters
        self.initialized = True

    def _get_loss_factor(self, runner) -> int:
        """What this iteration's loss is divided by: its accumulation window's length.

        ``cumulative_iters``, or in the run's last, shorter window its own
        length (mmcv 1.7.2's factors). A subclass's override is asked at every
        backward instead (rank-local: each rank asks it for its own loss).
        """
        return self.optim_step.window.divisor(runner.iter, run_end(runner))

    def _asks_loss_factor(self, runner):
        """``ask_divisor`` for the step: a subclass's ``_get_loss_factor``, else None."""
        if type(self)._get_loss_factor is OptimizerHook._get_loss_factor:
            return None  # (the window answers: nothing to call per iteration)
        return lambda iteration: self._get_loss_factor(runner)

    # -- the run -------------------------------------------------------------
    def before_run(self, runner) -> None:
        step = self.optim_step
        if step.amp_dtype is not None:  # the one place mixed precision is switched on
            check_autocast_support(runner.device, step.amp_dtype)
            if not hasattr(runner.batch_processor, 'autocast_dtype'):
                raise TypeError(f'fp16 needs a batch processor with an autocast_dtype '
                                f'attribute (a BatchProcessor subclass); '
                                f'{type(runner.batch_processor).__name__} has none')
            runner.batch_processor.autocast_dtype = step.amp_dtype
            # mmcv's: @auto_fp16/@force_fp32 methods switch on, told the run's half dtype
            wrap_fp16_model(runner.model, step.amp_dtype)
        step.setup(runner.optimizer, runner.device, runner.model_wrapper.module, runner.logger,
                   run_end=lambda: run_end(runner), clip=lambda: self._clip(runner),
                   ask_divisor=self._asks_loss_factor(runner),
                   detect=lambda loss: self.detect_anomalous_parameters(loss, runner))
        self._count_own_steps(runner)
        if step.micro_batch.enabled:
            check_micro_batching(runner, self._counts_own_steps)
        self._init(runner)
        if not self._settles_at_log_lines:  # (the buffer polls it at every log line)
            runner.log_buffer.add_source(lambda: self._at_log_line(runner))
            self._settles_at_log_lines = True

    def after_run(self, runner) -> None:
        self._settle_device_skips(runner)
        self.optim_step.teardown()
        if self._step_counter is not None:
            self._step_counter.remove()
            self._step_counter = None

    def _count_own_steps(self, runner) -> None:
        """Count ``optimizer.step()`` calls in ``num_updates`` if a subclass steps itself."""
        self._counts_own_steps = type(self).after_train_iter is not OptimizerHook.after_train_iter
        if not self._counts_own_steps or self._step_counter is not None:
            return

        def count(optimizer, args, kwargs) -> None:
            runner.num_updates += 1

        self._step_counter = runner.optimizer.register_step_post_hook(count)

    def after_train_iter(self, runner) -> None:
        step, it, hooked = self.optim_step, runner.iter, runner.hooked_stages
        # (getattr: a processor written before the BatchProcessor base class may lack it)
        # (micro_batch: the processor back-propagated each micro-batch)
        if not (getattr(runner.batch_processor, 'does_backward', False)
                or step.micro_batch.enabled):
            if 'before_backward' in hooked:  # (a point no hook uses costs nothing)
                runner.call_hook('before_backward')
            try:
                step.backward(runner.outputs['loss'], it)
            except RuntimeError as e:  # (no cost until raised)
                if is_out_of_memory(e):
                    raise out_of_memory_stop(e, runner.outputs.get('num_samples', '?'),
                                             'backward') from e
                raise
            if 'after_backward' in hooked:
                runner.call_hook('after_backward')
        if step.ends_window(it):
            step.optimizer = runner.optimizer  # (a hook may have replaced it)
            if step.scaled_step is not None:  # (nothing to unscale in full precision or bf16)
                step.unscale_()
            if 'before_optimizer_step' in hooked:
                runner.call_hook('before_optimizer_step')
            result = step.update()
            if result is STEPPED and not step.can_skip:
                if not self._counts_own_steps:  # (else the optimizer's step hook counted it)
                    runner.num_updates += 1  # the common case: nothing to log
            else:
                self.record(runner, result)

    def record(self, runner, result: UpdateResult) -> None:
        """Count the update and log ``grad_norm`` and the skipped steps.

        The norm of a skipped update (inf or NaN) is not logged, whether the
        host or the device decided the skip: where updates can be skipped the
        norms go through the step's meter, which drops the ones flagged on
        the device when it is read at the log line.
        """
        step = self.optim_step
        if result.stepped:
            if not self._counts_own_steps:  # (else the optimizer's step hook counted it)
                runner.num_updates += 1  # (if deferred, maybe skipped: see _settle_device_skips)
            if result.grad_norm is not None:
                weight = runner.outputs.get('num_samples', 1)
                if step.can_skip:
                    step.grad_norms.add(result.grad_norm, weight, result.verdict.flag)
                else:
                    runner.log_buffer.update({'grad_norm': result.grad_norm}, weight)
        else:
            scale = f', loss scale now {step.scaler.get_scale():g}' if step.scaler else ''
            where = ' (on at least one rank)' if runner.world_size > 1 else ''
            runner.logger.warning(
                f'{result.skipped_because}{where} at iteration {runner.iter + 1}: the step was '
                f'skipped (weights and update count unchanged; {self.skipped_steps} skipped '
                f'so far){scale}')
        # The counters themselves (device tensors, the same object each time): the buffer
        # reads them at the log line, so the line shows the count at that moment.
        if step.scaler is not None:
            runner.log_buffer.update({'fp16_skipped_steps': step.overflow_skips.total})
        if step.skip_nonfinite:
            runner.log_buffer.update({'skipped_steps': step.nonfinite_skips.total})

    def _at_log_line(self, runner) -> Dict[str, Any]:
        """Polled by the log buffer when it averages: settle the skips, give the norms."""
        self._settle_device_skips(runner)
        return self.optim_step.grad_norms.take()

    def _settle_device_skips(self, runner) -> None:
        """Read the skips decided on the device, warn once and correct ``num_updates``.

        Polled by the log buffer when it averages (a log line: the buffer reads
        back then anyway) and called at the end of the run. Reads nothing when
        no update since the last call could have been skipped on the device.
        (The counts themselves are logged by :meth:`record`.)
        """
        step = self.optim_step
        new = step.take_device_skips()
        if not any(new.values()):
            return
        runner.num_updates -= sum(new.values())
        where = ' (on at least one rank)' if runner.world_size > 1 else ''
        for kind, why, total in (('nonfinite', 'the loss was not finite', step.skipped_nonfinite),
                                 ('overflow', 'inf/NaN gradients', step.skipped_overflow)):
            if new[kind]:
                scale = (f', loss scale now {step.scaler.get_scale():g}'
                         if kind == 'overflow' else '')
                runner.logger.warning(
                    f'{new[kind]} step(s) skipped since the last log line: {why}{where}; the '
                    f'fused optimizer left the weights unchanged on the device ({total} '
                    f'skipped so far; update count corrected to {runner.num_updates}{scale})')

    def _warn_about_accumulation(self, runner) -> None:
        if runner.iter % self.cumulative_iters and not self.optim_step.window_in_progress:
            runner.logger.warning(
                f'resuming at iteration {runner.iter}, which is not a multiple of '
                f'cumulative_iters={self.cumulative_iters}, from a checkpoint without the '
                'window\'s gradients: the first window is shorter')
        if self.has_batch_norm(runner.model):
            runner.logger.warning('gradient accumulation with BatchNorm: the statistics '
                                  'still come from each small batch')

    def has_batch_norm(self, module: nn.Module) -> bool:
        """Whether ``module`` or a submodule is a BatchNorm (mmcv 1.x's method, kept for callers)."""
        return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in module.modules())

    # -- state ---------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        return self.optim_step.state_dict()

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.optim_step.load_state_dict(state)


@HOOKS.register_module()
class GradientCumulativeOptimizerHook(OptimizerHook):
    """Accumulate gradients over ``cumulative_iters`` iterations, then step once.

    As in mmcv 1.x, windows follow the global iteration count (they cross
    epoch boundaries) and each loss is divided by the window length, except in
    the run's last, shorter window, whose losses are divided by its own length
    (``max_iters % cumulative_iters``), so every update averages the losses
    that went into it. The end of the run is asked for at each iteration
    (:func:`run_end`): resumed on more processes, an epoch-based run has fewer
    iterations left, and its last window is cut there. ``runner.num_updates``
    moves once per window. A checkpoint written inside a window holds its
    gradients, so a resumed run makes the same update.

    Config::

        optimizer_config = dict(type='GradientCumulativeOptimizerHook',
                                cumulative_iters=4, grad_clip=None)
    """

    def __init__(self, cumulative_iters: int = 1, grad_clip: Optional[Dict[str, Any]] = None,
                 detect_anomalous_params: bool = False, clip_params: str = 'model',
                 micro_batch: Union[str, int, None] = None) -> None:
        super().__init__(grad_clip, detect_anomalous_params, clip_params, micro_batch)
        self.cumulative_iters = cumulative_iters


CLIP_PARAMS = ('model', 'optimizer')


def _checked_clip_params(value: str) -> str:
    if value not in CLIP_PARAMS:
        raise ValueError(f"clip_params must be 'model' (mmcv 1.x: the model's parameters) or "
                         f"'optimizer' (mmengine: the optimizer's), got {value!r}")
    return value
