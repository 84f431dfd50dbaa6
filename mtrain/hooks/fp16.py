"""Mixed-precision optimizer hooks: fp16 with a loss scale, or bf16 without one.

Selected by mmcv 1.x's top-level key, which the builder merges into
``optimizer_config``::

    fp16 = dict(loss_scale=512.)                 # static scale
    fp16 = dict(loss_scale='dynamic')            # GradScaler's defaults
    fp16 = dict(loss_scale=dict(init_scale=2.**16, growth_interval=1000))
    fp16 = dict(dtype='bfloat16')                # bf16 autocast, no scaling
    fp16 = None                                  # full precision (the default)

or directly ``optimizer_config = dict(type='Fp16OptimizerHook', loss_scale=...)``.

The hooks only configure their :class:`~mtrain.step.OptimStep`; the step, in
execution order: scale the loss and backward (each micro-step), unscale the
gradients, clip them (the logged ``grad_norm`` is the true, unscaled norm),
step through the scaler, update the scale, clear the gradients. A step whose
gradients hold an inf or NaN is skipped by the scaler: the weights and
``runner.num_updates`` stay as they are (so update-counted schedules and EMA
do not move), the iteration counter moves on, and the skip is logged. With a
fused optimizer (``fused=True``) GradScaler hands the verdict to the kernels
on the device and reads nothing back; the step is then counted in
``num_updates`` until the next log line, which reads the skips, logs them
once and takes them off (see :mod:`mtrain.hooks.optimizer`).
"""

from typing import Any, Dict, Iterable, Optional, Union

import torch
from torch import nn

from ..registry import HOOKS
from ..step import OptimStep, check_autocast_support, parse_dtype
from ..step.amp import MMCV_DEFAULT_SCALE
from .optimizer import OptimizerHook


@HOOKS.register_module()
class Fp16OptimizerHook(OptimizerHook):
    """Optimizer hook for ``torch.autocast`` training, with a ``torch.amp.GradScaler``.

    In ``before_run`` the hook sets the batch processor's ``autocast_dtype``,
    so the forward runs under ``torch.autocast(device, dtype)``. On CUDA it
    uses the CUDA autocast and scaler, on the CPU the CPU ones (so it runs
    without a GPU). Assumes the model's parameters are fp32 (autocast casts
    per op); do not ``.half()`` the model. The scaler state (scale, growth
    tracker) and the number of skipped steps are saved in checkpoints and
    restored on resume.

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
        detect_anomalous_params, clip_params, micro_batch: as in :class:`OptimizerHook`.
    """

    _cumulative_iters = 1  # mmcv's arguments have no accumulation; the subclass below sets it

    def __init__(self, grad_clip: Optional[Dict[str, Any]] = None,
                 loss_scale: Union[float, str, Dict[str, Any], None] = MMCV_DEFAULT_SCALE,
                 dtype: Union[str, torch.dtype] = 'float16', distributed: bool = True,
                 coalesce: bool = True, bucket_size_mb: int = -1,
                 detect_anomalous_params: bool = False, clip_params: str = 'model',
                 micro_batch: Union[str, int, None] = None) -> None:
        super().__init__(grad_clip, detect_anomalous_params, clip_params)
        self._optim_step = OptimStep(
            grad_clip=grad_clip, cumulative_iters=self._cumulative_iters, amp_dtype=dtype,
            loss_scale=_scale_for(parse_dtype(dtype), loss_scale),
            detect_anomalous_params=detect_anomalous_params, micro_batch=micro_batch)
        self.distributed, self.coalesce, self.bucket_size_mb = distributed, coalesce, bucket_size_mb

    def _default_step(self) -> OptimStep:
        """A subclass that skipped ``__init__`` (mmcv's style): float16, mmcv's static 512."""
        return OptimStep(amp_dtype='float16', loss_scale=MMCV_DEFAULT_SCALE)

    # -- what mmcv 1.x subclasses read and set (their after_train_iter copies mmcv's) ----
    @property
    def loss_scaler(self) -> Optional[torch.amp.GradScaler]:
        """The ``torch.amp.GradScaler`` the step scales, unscales and steps with (None: bf16).

        The live object: ``get_scale()`` is the current scale, and a subclass
        that calls ``loss_scaler.scale(loss).backward()``, ``unscale_``,
        ``step`` and ``update(self._scale_update_param)`` itself trains as on
        mmcv. Read before the run it is made for the likely device (CUDA if
        present); the run moves its state to the run's device. Setting it
        (mmcv subclasses that skip ``__init__``) makes the step use that one.
        """
        scaled = self.optim_step.scaled_step
        return None if scaled is None else scaled.made_early()

    @loss_scaler.setter
    def loss_scaler(self, scaler: torch.amp.GradScaler) -> None:
        self.optim_step.use_scaler(scaler)

    @property
    def _scale_update_param(self) -> Optional[float]:
        """mmcv's argument to ``loss_scaler.update``: the static scale, or None (dynamic)."""
        scaled = self.optim_step.scaled_step
        return None if scaled is None else scaled.static_scale

    @_scale_update_param.setter
    def _scale_update_param(self, value: Optional[float]) -> None:
        if self.optim_step.scaled_step is None:
            raise AttributeError('_scale_update_param: this hook has no loss scaler (bf16); '
                                 'set loss_scaler first')
        self.optim_step.scaled_step.static_scale = None if value is None else float(value)

    def copy_grads_to_fp32(self, fp16_net: nn.Module,
                           fp32_weights: Iterable[torch.Tensor]) -> None:
        """mmcv's legacy-path helper: copy each ``fp16_net`` gradient into its fp32 copy.

        Pairs the two in order; a missing fp32 gradient is made. (mtrain's
        step keeps fp32 weights under autocast and never calls it.)
        """
        for fp32, half in zip(fp32_weights, fp16_net.parameters()):
            if half.grad is None:
                continue
            if fp32.grad is None:
                fp32.grad = torch.empty_like(fp32.data)
            fp32.grad.copy_(half.grad)

    def copy_params_to_fp16(self, fp16_net: nn.Module,
                            fp32_weights: Iterable[torch.Tensor]) -> None:
        """mmcv's legacy-path helper: copy the fp32 weights back into ``fp16_net``, in order."""
        for half, fp32 in zip(fp16_net.parameters(), fp32_weights):
            half.data.copy_(fp32.data)


@HOOKS.register_module()
class GradientCumulativeFp16OptimizerHook(Fp16OptimizerHook):
    """:class:`Fp16OptimizerHook` with gradient accumulation over ``cumulative_iters``.

    The windows and loss divisors are those of
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
        self._cumulative_iters = cumulative_iters
        super().__init__(**kwargs)


def _scale_for(dtype: torch.dtype, loss_scale: Any) -> Any:
    """The loss scale to use: none for bf16 (it has fp32's range), else ``loss_scale``."""
    if dtype != torch.bfloat16:
        return loss_scale
    if loss_scale not in (None, MMCV_DEFAULT_SCALE):
        raise ValueError(f"fp16 dtype='bfloat16' uses no loss scaling (bf16 has fp32's "
                         f'range), but loss_scale={loss_scale!r} was given; remove loss_scale')
    return None


__all__ = ['Fp16OptimizerHook', 'GradientCumulativeFp16OptimizerHook',
           'check_autocast_support']
