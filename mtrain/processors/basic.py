"""One batch per training step: the default batch processor."""

from typing import Any, Dict, Tuple

import torch

from ..registry import BATCH_PROCESSORS
from ..step.micro_batch import is_out_of_memory, out_of_memory_stop
from .base import BatchProcessor
from .contract import check_step_outputs
from .losses import parse_losses
from .micro_batches import train_in_micro_batches
from .to_device import batch_size, to_device


@BATCH_PROCESSORS.register_module()
class BasicBatchProcessor(BatchProcessor):
    """Forward one batch and collect its losses; the ``OptimizerHook`` back-propagates.

    ``processor(runner, batch, train_mode)`` moves ``batch`` to
    ``runner.device`` (non-blocking), calls ``runner.model_wrapper.train_step`` (or
    ``val_step``) and returns ``dict(loss, log_vars, num_samples)``. In eval
    mode a model that returns predictions gives ``predictions`` instead.

    Config::

        batch_processor = dict(type='BasicBatchProcessor')   # the default
        batch_processor = dict(type='BasicBatchProcessor', channels_last=True)

    Args: see :class:`~mtrain.processors.base.BatchProcessor`.
    """

    #: Runs ``optimizer_config.micro_batch`` (see :mod:`.micro_batches`).
    splits_micro_batches = True

    def __call__(self, runner, batch: Any, train_mode: bool) -> Dict[str, Any]:
        step = runner.optim_step
        if train_mode and step is not None and step.micro_batch.enabled:
            loss, log_vars, samples = train_in_micro_batches(
                self, runner, self._prepare(runner, batch), self._micro_losses)
            return {'loss': loss, 'log_vars': log_vars, 'num_samples': samples}
        try:
            return self._step(runner, batch, train_mode)
        except RuntimeError as e:  # (no cost until raised)
            if train_mode and is_out_of_memory(e):
                raise out_of_memory_stop(e, batch_size(batch), 'forward') from e
            raise

    def _prepare(self, runner, batch: Any) -> Any:
        batch = to_device(batch, runner.device)
        return self.to_channels_last(runner, batch) if self.channels_last else batch

    def _step(self, runner, batch: Any, train_mode: bool) -> Dict[str, Any]:
        batch = self._prepare(runner, batch)
        # mmcv's contract (parallel/batch_call.py)
        if getattr(runner.model_wrapper, 'own_steps', False):
            return self.own_step(runner, batch, train_mode)
        if not train_mode:
            return self.evaluate(runner, batch)
        step = runner.optim_step
        if step is None or step.cumulative_iters == 1:
            output = self.forward(runner, batch)  # every backward syncs: no context to enter
        else:
            with self.grad_sync(runner):
                output = self.forward(runner, batch)
        loss, log_vars = parse_losses(output)
        return {'loss': loss, 'log_vars': log_vars, 'num_samples': batch_size(batch)}

    def _micro_losses(self, runner, batch: Any) -> Tuple[torch.Tensor, Dict[str, Any]]:
        """One micro-batch's ``(loss, log_vars)``: the model's own ``train_step`` or the forward."""
        if getattr(runner.model_wrapper, 'own_steps', False):
            outputs = self.own_step(runner, batch, True)
            return outputs['loss'], outputs.get('log_vars', {})
        return parse_losses(self.forward(runner, batch))

    def own_step(self, runner, batch: Any, train_mode: bool) -> Dict[str, Any]:
        """``model.train_step(batch, optimizer)`` (or ``val_step``): the model makes the outputs."""
        runner.call_hook('before_forward')
        model = runner.model_wrapper
        step = model.train_step if train_mode else model.val_step
        with self.grad_sync(runner), self.autocast(runner.device):
            outputs = step(batch, runner.optimizer)
        runner.call_hook('after_forward')
        return check_step_outputs(outputs, lambda: _step_name(runner, train_mode), 'model',
                                  train_mode, needs_loss=runner.optimizer_hook is not None)


def _step_name(runner, train_mode: bool) -> str:
    """``MyDetector.train_step``: the user's method, named in a contract error."""
    model = getattr(runner.model, 'module', runner.model)
    return f"{type(model).__name__}.{'train_step' if train_mode else 'val_step'}"
