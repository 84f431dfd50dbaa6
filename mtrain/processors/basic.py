"""One batch per training step: the default batch processor."""

from contextlib import nullcontext
from typing import Any, Dict, Union

import torch

from ..registry import BATCH_PROCESSORS
from .losses import parse_losses
from .to_device import batch_size, to_device


@BATCH_PROCESSORS.register_module()
class BasicBatchProcessor:
    """Forward one batch and collect its losses.

    Contract: ``processor(runner, batch, train_mode)`` moves ``batch`` to
    ``runner.device`` (non-blocking), calls ``runner.model.train_step`` (or
    ``val_step``) and returns ``dict(loss, log_vars, num_samples)``; the
    ``OptimizerHook`` then does backward and step. In eval (``train_mode=False``)
    with a model that returns predictions, ``loss`` is absent and
    ``predictions`` holds the output.

    Config::

        batch_processor = dict(type='BasicBatchProcessor')   # the default

    Args:
        autocast_dtype: run the forward under ``torch.autocast`` in this dtype
            (a ``torch.dtype`` or its name, e.g. ``'bfloat16'``; set from the
            ``fp16`` config); None for full precision.
        channels_last: put the model (once) and every 4-D floating-point batch
            tensor in ``torch.channels_last`` memory format, which convolutions
            on tensor-core GPUs run faster in.
    """

    #: The OptimizerHook does the backward for this processor.
    does_backward = False

    def __init__(self, autocast_dtype: Union[torch.dtype, str, None] = None,
                 channels_last: bool = False) -> None:
        if isinstance(autocast_dtype, str):
            autocast_dtype = getattr(torch, autocast_dtype.removeprefix('torch.'), autocast_dtype)
        if autocast_dtype is not None and not isinstance(autocast_dtype, torch.dtype):
            raise ValueError(f"autocast_dtype must be a torch dtype such as 'bfloat16' or "
                             f"'float16', got {autocast_dtype!r}")
        self.autocast_dtype = autocast_dtype
        self.channels_last = channels_last
        self._model_in_channels_last = False

    def autocast(self, device: torch.device):
        if self.autocast_dtype is None:
            return nullcontext()
        return torch.autocast(device.type, dtype=self.autocast_dtype)

    def __call__(self, runner, batch: Any, train_mode: bool) -> Dict[str, Any]:
        batch = to_device(batch, runner.device)
        if self.channels_last:
            batch = self.to_channels_last(runner, batch)
        if getattr(runner.model, 'own_steps', False):  # mmcv's contract (parallel/batch_call.py)
            return self.own_step(runner, batch, train_mode)
        if not train_mode:
            with self.autocast(runner.device):
                return self.collect(runner.model.val_step(batch), batch, False)
        runner.call_hook('before_forward')
        sync = self.grad_sync(runner, train_mode)
        if sync is None and self.autocast_dtype is None:
            output = runner.model.train_step(batch)  # the common case: no context to enter
        else:
            with sync or nullcontext(), self.autocast(runner.device):
                output = runner.model.train_step(batch)
        runner.call_hook('after_forward')
        return self.collect(output, batch, True)

    def own_step(self, runner, batch: Any, train_mode: bool) -> Dict[str, Any]:
        """``model.train_step(batch, optimizer)`` (or ``val_step``): the model makes the outputs."""
        runner.call_hook('before_forward')
        with self.grad_sync(runner, train_mode) or nullcontext(), self.autocast(runner.device):
            step = runner.model.train_step if train_mode else runner.model.val_step
            outputs = step(batch, runner.optimizer)
        runner.call_hook('after_forward')
        if not isinstance(outputs, dict):
            raise TypeError('"model.train_step()" and "model.val_step()" must return a dict '
                            f'(loss, log_vars, num_samples), got {type(outputs).__name__}')
        return outputs

    @staticmethod
    def grad_sync(runner, train_mode: bool):
        """``model.no_sync()`` unless this step's backward precedes an optimizer step.

        DDP decides at the forward whether the next backward all-reduces, so an
        accumulation micro-step runs its forward inside ``no_sync()``. None
        when there is nothing to suspend.
        """
        hook = runner.optimizer_hook
        if not train_mode or hook is None or hook.will_step(runner):
            return None
        return runner.model.no_sync()

    def to_channels_last(self, runner, batch: Any) -> Any:
        """The batch with 4-D float tensors in channels_last; converts the model on first use."""
        if not self._model_in_channels_last:
            # In place (the parameters stay the same objects the optimizer holds).
            runner.model.to(memory_format=torch.channels_last)
            self._model_in_channels_last = True
        if isinstance(batch, dict):
            return {k: self.to_channels_last(runner, v) for k, v in batch.items()}
        if isinstance(batch, (list, tuple)) and not hasattr(batch, '_fields'):
            return type(batch)(self.to_channels_last(runner, v) for v in batch)
        if isinstance(batch, torch.Tensor) and batch.dim() == 4 and batch.is_floating_point():
            return batch.contiguous(memory_format=torch.channels_last)
        return batch

    @staticmethod
    def collect(output: Any, batch: Any, train_mode: bool) -> Dict[str, Any]:
        """Turn a model output into the processor's outputs dict."""
        if not train_mode and not _looks_like_losses(output):
            return {'predictions': output, 'num_samples': batch_size(batch)}
        loss, log_vars = parse_losses(output)
        return {'loss': loss, 'log_vars': log_vars, 'num_samples': batch_size(batch)}


def _looks_like_losses(output: Any) -> bool:
    return isinstance(output, dict) and any('loss' in k for k in output)
