"""The optimizer step, in execution order: backward → clip → step → zero_grad.

Config (mmcv 1.x keys)::

    optimizer_config = dict(grad_clip=dict(max_norm=35, norm_type=2))
    optimizer_config = dict(type='GradientCumulativeOptimizerHook', cumulative_iters=4)

Every real update adds one to ``runner.num_updates``, the counter that
schedules and checkpoint-by-update follow; an accumulation micro-step does not.
"""

from typing import Any, Dict, List, Optional

import torch
from torch import nn
from torch.nn.utils import clip_grad_norm_

from ..registry import HOOKS
from .hook import Hook


@HOOKS.register_module()
class OptimizerHook(Hook):
    """Backward the processor's ``loss`` and step the optimizer every iteration.

    Args:
        grad_clip: arguments of ``torch.nn.utils.clip_grad_norm_`` (e.g.
            ``dict(max_norm=35, norm_type=2)``); the norm before clipping is
            logged as ``grad_norm`` (on the device until the log interval).
        detect_anomalous_params: log every parameter that took no part in
            producing the loss (slow: walks the autograd graph; debug only).
    """

    priority = 'ABOVE_NORMAL'
    cumulative_iters = 1

    def __init__(self, grad_clip: Optional[Dict[str, Any]] = None,
                 detect_anomalous_params: bool = False) -> None:
        if grad_clip is not None and not isinstance(grad_clip, dict):
            raise TypeError(f'grad_clip must be None or a dict such as dict(max_norm=35), '
                            f'got {grad_clip!r}')
        self.grad_clip = grad_clip
        self.detect_anomalous_params = detect_anomalous_params
        self._params: List[nn.Parameter] = []

    def before_run(self, runner) -> None:
        # The parameter list is fixed for the run: collect it once, not per step.
        self._params = [p for group in runner.optimizer.param_groups
                        for p in group['params'] if p.requires_grad]
        runner.optimizer.zero_grad(set_to_none=True)

    def will_step(self, runner) -> bool:
        """Whether this iteration ends with an optimizer update (else: no grad sync)."""
        return True

    def after_train_iter(self, runner) -> None:
        if runner.outputs.get('skip_step'):  # vetoed (non-finite loss, nan_policy='skip')
            if runner.batch_processor.does_backward:
                runner.optimizer.zero_grad(set_to_none=True)  # drop the whole step's grads
            return
        if not runner.batch_processor.does_backward:
            self.backward(runner, runner.outputs['loss'])
        if self.will_step(runner):
            self.step(runner)

    def loss_factor(self, runner) -> float:
        """What the loss is divided by before backward (accumulation)."""
        return 1

    def backward(self, runner, loss: torch.Tensor) -> None:
        """Backpropagate ``loss`` (batch processors that backward call this too)."""
        if self.detect_anomalous_params:
            log_anomalous_params(loss, runner.model.module, runner.logger)
        factor = self.loss_factor(runner)
        runner.call_hook('before_backward')
        self.scale_loss(loss / factor if factor != 1 else loss).backward()
        runner.call_hook('after_backward')

    def scale_loss(self, loss: torch.Tensor) -> torch.Tensor:
        """What is backpropagated for ``loss`` (Fp16OptimizerHook multiplies by the scale)."""
        return loss

    def step(self, runner) -> None:
        """Clip, step, clear the grads and count the update."""
        runner.call_hook('before_optimizer_step')
        if self.grad_clip is not None:
            grad_norm = self.clip_grads()
            if grad_norm is not None:
                runner.log_buffer.update({'grad_norm': grad_norm},
                                         runner.outputs.get('num_samples', 1))
        runner.optimizer.step()
        runner.optimizer.zero_grad(set_to_none=True)
        runner.num_updates += 1

    def clip_grads(self) -> Optional[torch.Tensor]:
        params = [p for p in self._params if p.grad is not None]
        if not params:
            return None
        return clip_grad_norm_(params, **self.grad_clip)


@HOOKS.register_module()
class GradientCumulativeOptimizerHook(OptimizerHook):
    """Accumulate gradients over ``cumulative_iters`` iterations, then step once.

    As in mmcv 1.x, windows follow the global iteration count (they cross
    epoch boundaries) and each loss is divided by the window length, except in
    the run's last, shorter window, whose losses are divided by its own length
    (``max_iters % cumulative_iters``), so every update averages the losses
    that went into it. ``runner.num_updates`` moves once per window.

    Config::

        optimizer_config = dict(type='GradientCumulativeOptimizerHook',
                                cumulative_iters=4, grad_clip=None)
    """

    def __init__(self, cumulative_iters: int = 1, **kwargs) -> None:
        super().__init__(**kwargs)
        if not isinstance(cumulative_iters, int) or cumulative_iters <= 0:
            raise ValueError(f'cumulative_iters must be a positive integer, got {cumulative_iters!r}')
        self.cumulative_iters = cumulative_iters

    def before_run(self, runner) -> None:
        super().before_run(runner)
        if runner.iter % self.cumulative_iters != 0:
            runner.logger.warning(
                f'resuming at iteration {runner.iter}, which is not a multiple of '
                f'cumulative_iters={self.cumulative_iters}: the first window is shorter')
        if _has_batch_norm(runner.model) and self.cumulative_iters > 1:
            runner.logger.warning('gradient accumulation with BatchNorm: the statistics '
                                  'still come from each small batch')

    def will_step(self, runner) -> bool:
        return self.every_n_iters(runner, self.cumulative_iters) or self.is_last_iter(runner)

    def loss_factor(self, runner) -> float:
        divisible_end = runner.max_iters // self.cumulative_iters * self.cumulative_iters
        if runner.iter < divisible_end:
            return self.cumulative_iters
        return runner.max_iters - divisible_end


def _has_batch_norm(module: nn.Module) -> bool:
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in module.modules())


def log_anomalous_params(loss: torch.Tensor, model: nn.Module, logger) -> None:
    """Log the parameters that ``loss`` does not depend on (DDP's unused ones)."""
    seen, used = set(), set()
    stack = [loss.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        if hasattr(fn, 'variable'):  # AccumulateGrad: the leaf is a parameter
            used.add(id(fn.variable))
        stack.extend(next_fn for next_fn, _ in fn.next_functions)
    for name, param in model.named_parameters():
        if param.requires_grad and id(param) not in used:
            logger.error(f'{name} with shape {tuple(param.size())} is not in the '
                         'computational graph of the loss')
