"""Mixed-precision optimisation: fp16 with a loss scale, or bf16 without one.

Selected by mmcv 1.x's top-level key, which the builder merges into
``optimizer_config``::

    fp16 = dict(loss_scale=512.)                 # static scale
    fp16 = dict(loss_scale='dynamic')            # GradScaler's defaults
    fp16 = dict(loss_scale=dict(init_scale=2.**16, growth_interval=1000))
    fp16 = dict(dtype='bfloat16')                # bf16 autocast, no scaling
    fp16 = None                                  # full precision (the default)

or directly ``optimizer_config = dict(type='Fp16OptimizerHook', loss_scale=...)``.

The step, in execution order (see :meth:`Fp16OptimizerHook.step`): scale the
loss and backward (each micro-step), unscale the gradients, clip them (the
logged ``grad_norm`` is the true, unscaled norm), step through the scaler,
update the scale, clear the gradients. A step whose gradients hold an inf or
NaN is skipped by the scaler: the weights and ``runner.num_updates`` stay as
they are (so LR schedules, EMA and update-based intervals do not move), the
iteration counter moves on, and the skip is logged.
"""

import warnings
from typing import Any, Dict, List, Optional, Union

import torch

from ..registry import HOOKS
from .optimizer import GradientCumulativeOptimizerHook, OptimizerHook

_DTYPES = {'float16': torch.float16, 'fp16': torch.float16, 'half': torch.float16,
           'bfloat16': torch.bfloat16, 'bf16': torch.bfloat16}
_SCALER_ARGS = ('init_scale', 'growth_factor', 'backoff_factor', 'growth_interval')
_MMCV_DEFAULT_SCALE = 512.


@HOOKS.register_module()
class Fp16OptimizerHook(OptimizerHook):
    """Optimizer hook for ``torch.autocast`` training, with a ``torch.amp.GradScaler``.

    In ``before_run`` the hook sets the batch processor's ``autocast_dtype``,
    so the forward runs under ``torch.autocast(device, dtype)``; this is the
    one place mixed precision is switched on. On CUDA it uses the CUDA
    autocast and scaler, on the CPU the CPU ones (so it runs without a GPU).

    Assumes the model's parameters are fp32 (autocast casts per op); do not
    ``.half()`` the model. The scaler state (scale, growth tracker) and the
    number of skipped steps are saved in checkpoints through
    :meth:`state_dict` and restored on resume.

    Config::

        fp16 = dict(loss_scale='dynamic')
        optimizer_config = dict(type='Fp16OptimizerHook', loss_scale=512.,
                                grad_clip=dict(max_norm=35, norm_type=2))

    Args:
        grad_clip: ``clip_grad_norm_`` arguments, applied to the unscaled gradients.
        loss_scale: a positive number (a static scale: it never changes, a
            step that overflows is skipped), ``'dynamic'`` (``GradScaler``'s
            defaults: start at 2**16, halve on overflow, double after 2000
            good steps) or a dict of ``GradScaler`` arguments
            (``init_scale``, ``growth_factor``, ``backoff_factor``,
            ``growth_interval``). Must be left at its default (or None) with
            ``dtype='bfloat16'``, which needs no scaling. Default: 512.
        dtype: ``'float16'`` (default) or ``'bfloat16'``.
        distributed, coalesce, bucket_size_mb: mmcv 1.x arguments, accepted
            and ignored: DDP averages the gradients in mtrain.
        detect_anomalous_params: as in :class:`OptimizerHook`.
    """

    def __init__(self, grad_clip: Optional[Dict[str, Any]] = None,
                 loss_scale: Union[float, str, Dict[str, Any], None] = _MMCV_DEFAULT_SCALE,
                 dtype: Union[str, torch.dtype] = 'float16', distributed: bool = True,
                 coalesce: bool = True, bucket_size_mb: int = -1,
                 detect_anomalous_params: bool = False) -> None:
        super().__init__(grad_clip=grad_clip, detect_anomalous_params=detect_anomalous_params)
        self.dtype = _parse_dtype(dtype)
        if self.dtype == torch.bfloat16 and loss_scale not in (None, _MMCV_DEFAULT_SCALE):
            raise ValueError(f"fp16 dtype='bfloat16' uses no loss scaling (bf16 has fp32's "
                             f'range), but loss_scale={loss_scale!r} was given; remove loss_scale')
        self.scaler_args, self.static_scale = (
            (None, None) if self.dtype == torch.bfloat16 else _parse_loss_scale(loss_scale))
        self.scaler: Optional[torch.amp.GradScaler] = None
        self.skipped_steps = 0
        self._pending_state: Dict[str, Any] = {}
        self._stepped = False
        self._step_hook = None

    # -- setup -------------------------------------------------------------
    def before_run(self, runner) -> None:
        super().before_run(runner)
        check_autocast_support(runner.device, self.dtype)
        if not hasattr(runner.batch_processor, 'autocast_dtype'):
            raise TypeError(f'fp16 needs a batch processor with an autocast_dtype attribute '
                            f'(BasicBatchProcessor, MultiBatchProcessor); '
                            f'{type(runner.batch_processor).__name__} has none')
        runner.batch_processor.autocast_dtype = self.dtype
        if self.scaler_args is not None:
            self.scaler = torch.amp.GradScaler(runner.device.type, **self.scaler_args)
            if self._pending_state.get('scaler'):
                self.scaler.load_state_dict(self._pending_state['scaler'])
        self._pending_state = {}
        # Whether optimizer.step() really ran: GradScaler.step skips it on inf/NaN
        # gradients and says so nowhere public; a step post-hook is the public way.
        self._step_hook = runner.optimizer.register_step_post_hook(self._mark_stepped)

    def after_run(self, runner) -> None:
        if self._step_hook is not None:
            self._step_hook.remove()
            self._step_hook = None

    def _mark_stepped(self, optimizer, args, kwargs) -> None:
        self._stepped = True

    # -- the step, in execution order ---------------------------------------
    def scale_loss(self, loss: torch.Tensor) -> torch.Tensor:
        """``loss`` times the loss scale (bf16: ``loss``); :meth:`backward` backpropagates it."""
        return loss if self.scaler is None else self.scaler.scale(loss)

    def step(self, runner) -> None:
        """Unscale → clip → step through the scaler → update the scale → zero_grad."""
        if self.scaler is None:  # bf16: a plain step
            super().step(runner)
            return
        self.scaler.unscale_(runner.optimizer)  # .grad now holds the true gradients
        runner.call_hook('before_optimizer_step')
        grad_norm = self.clip_grads() if self.grad_clip is not None else None
        self._stepped = False
        self.scaler.step(runner.optimizer)  # skips optimizer.step() on inf/NaN gradients
        self.scaler.update(self.static_scale)  # a static scale is set back every step
        runner.optimizer.zero_grad(set_to_none=True)
        if self._stepped:
            runner.num_updates += 1
            if grad_norm is not None:  # an overflowed step's norm is inf: not logged
                runner.log_buffer.update({'grad_norm': grad_norm},
                                         runner.outputs.get('num_samples', 1))
        else:
            self.skipped_steps += 1
            runner.logger.warning(
                f'fp16: inf/NaN gradients at iteration {runner.iter + 1}: the step was skipped '
                f'(weights and LR schedule unchanged; {self.skipped_steps} skipped so far), '
                f'loss scale now {self.scaler.get_scale():g}')
        runner.log_buffer.update({'fp16_skipped_steps': self.skipped_steps})

    # -- state -------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        if self.scaler is None and not self._pending_state:
            return {'skipped_steps': self.skipped_steps} if self.skipped_steps else {}
        scaler = self.scaler.state_dict() if self.scaler else self._pending_state.get('scaler')
        return {'scaler': scaler, 'skipped_steps': self.skipped_steps}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.skipped_steps = state.get('skipped_steps', 0)
        if self.scaler is not None and state.get('scaler'):
            self.scaler.load_state_dict(state['scaler'])
        else:  # resumed before the run started: applied in before_run
            self._pending_state = dict(state)


@HOOKS.register_module()
class GradientCumulativeFp16OptimizerHook(Fp16OptimizerHook):
    """:class:`Fp16OptimizerHook` with gradient accumulation over ``cumulative_iters``.

    The windows and loss factors are those of
    :class:`GradientCumulativeOptimizerHook`; the scaled gradients of a
    window accumulate in ``.grad`` and are unscaled once, before the one
    step. An inf/NaN anywhere in the window skips the whole window's update.

    Config::

        fp16 = dict(loss_scale='dynamic')
        optimizer_config = dict(type='GradientCumulativeOptimizerHook', cumulative_iters=4)
        # (the builder turns this into GradientCumulativeFp16OptimizerHook)

    Args:
        cumulative_iters: iterations per optimizer update.
        **kwargs: the arguments of :class:`Fp16OptimizerHook`.
    """

    def __init__(self, cumulative_iters: int = 1, **kwargs) -> None:
        super().__init__(**kwargs)
        if not isinstance(cumulative_iters, int) or cumulative_iters <= 0:
            raise ValueError(f'cumulative_iters must be a positive integer, '
                             f'got {cumulative_iters!r}')
        self.cumulative_iters = cumulative_iters

    # The same window arithmetic as the fp32 hook (plain functions, no second base class).
    will_step = GradientCumulativeOptimizerHook.will_step
    loss_factor = GradientCumulativeOptimizerHook.loss_factor


def check_autocast_support(device: torch.device, dtype: torch.dtype) -> None:
    """Raise a ``RuntimeError`` naming the way out when ``device`` cannot autocast to ``dtype``."""
    name = {torch.float16: 'float16', torch.bfloat16: 'bfloat16'}[dtype]
    if not torch.amp.is_autocast_available(device.type):
        raise RuntimeError(f'fp16: torch.autocast is not available on device {device.type!r}; '
                           'set fp16=None to train in full precision')
    if dtype == torch.bfloat16 and device.type == 'cuda' and not torch.cuda.is_bf16_supported():
        gpu = torch.cuda.get_device_name(device)
        raise RuntimeError(f'fp16 dtype=bfloat16 was asked for, but {gpu} '
                           "cannot compute in bfloat16; use fp16=dict(loss_scale='dynamic') "
                           'for float16 or fp16=None')
    # An unsupported dtype makes torch.autocast warn and do nothing (or raise): make it an error.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        try:
            with torch.autocast(device.type, dtype=dtype):
                pass
        except RuntimeError as e:
            caught.append(e)
    problems = [str(getattr(w, 'message', w)) for w in caught
                if 'autocast' in str(getattr(w, 'message', w)).lower()]
    if problems:
        raise RuntimeError(f'fp16: autocast to {name} is not supported on {device.type} here '
                           f'({problems[0]}); choose the other dtype or set fp16=None')


def _parse_dtype(dtype: Union[str, torch.dtype]) -> torch.dtype:
    if isinstance(dtype, torch.dtype) and dtype in (torch.float16, torch.bfloat16):
        return dtype
    if isinstance(dtype, str) and dtype in _DTYPES:
        return _DTYPES[dtype]
    raise ValueError(f"fp16 dtype must be 'float16' or 'bfloat16', got {dtype!r}")


def _parse_loss_scale(loss_scale: Any):
    """``(GradScaler kwargs, static scale or None)`` for a ``loss_scale`` config value."""
    if isinstance(loss_scale, (int, float)) and not isinstance(loss_scale, bool):
        if not loss_scale > 0 or loss_scale == float('inf'):
            raise ValueError(f'fp16 loss_scale must be a positive finite number, '
                             f'got {loss_scale!r}')
        return dict(init_scale=float(loss_scale)), float(loss_scale)
    if loss_scale == 'dynamic':
        return {}, None
    if isinstance(loss_scale, dict):
        unknown = sorted(set(loss_scale) - set(_SCALER_ARGS))
        if unknown:
            raise ValueError(f'fp16 loss_scale dict has unknown keys {unknown}; GradScaler '
                             f'accepts {", ".join(_SCALER_ARGS)}')
        return dict(loss_scale), None
    raise TypeError(f"fp16 loss_scale must be a number (static scale), 'dynamic' or a dict of "
                    f'GradScaler arguments ({", ".join(_SCALER_ARGS)}), got {loss_scale!r}')


__all__: List[str] = ['Fp16OptimizerHook', 'GradientCumulativeFp16OptimizerHook',
                      'check_autocast_support']
