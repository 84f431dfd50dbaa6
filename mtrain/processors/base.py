"""The batch-processor contract, as a base class to subclass.

A batch processor is what one training (or val) step does with what the
loader yielded. Subclass :class:`BatchProcessor` and implement ``__call__``::

    @BATCH_PROCESSORS.register_module()
    class MyProcessor(BatchProcessor):
        def __call__(self, runner, batch, train_mode):
            batch = to_device(batch, runner.device)
            if not train_mode:
                return self.evaluate(runner, batch)
            with self.grad_sync(runner):                 # no_sync() inside a window
                output = self.forward(runner, batch)     # hook points + autocast
            loss, log_vars = parse_losses(output)
            return dict(loss=loss, log_vars=log_vars, num_samples=batch_size(batch))

    batch_processor = dict(type='MyProcessor')

See docs/batch_processors.md for a processor that back-propagates itself.
"""

from contextlib import nullcontext
from typing import Any, Dict, Union

import torch

from .losses import parse_losses
from .to_device import batch_size


class BatchProcessor:
    """Base class of batch processors: the contract and the helpers that keep it.

    ``processor(runner, batch, train_mode)`` returns a dict with ``loss`` (the
    tensor to back-propagate, or already back-propagated), ``log_vars``
    (name → detached tensor or number, averaged over the log interval) and
    ``num_samples``; in eval mode a model that returns predictions gives
    ``predictions`` instead of ``loss``.

    What a subclass must keep:

    - **Who back-propagates.** ``does_backward = False`` (the default): the
      ``OptimizerHook`` back-propagates ``outputs['loss']`` at
      ``after_train_iter``. ``does_backward = True``: the processor calls
      :meth:`backward` for each loss itself (e.g. to free one batch's
      activations before the next); the hook then only steps.
    - **The hook points.** :meth:`forward` calls ``before_forward`` /
      ``after_forward`` around the model call and :meth:`backward` calls
      ``before_backward`` / ``after_backward``; use them, or call the points.
    - **Mixed precision.** ``autocast_dtype`` is set by the fp16 optimizer
      hook before the run; :meth:`forward` runs the model under it.
    - **Accumulation under DDP.** A forward whose backward does not end an
      accumulation window runs inside ``runner.model_wrapper.no_sync()``:
      :meth:`grad_sync` gives that context (or a no-op one).

    Args:
        autocast_dtype: run the forward under ``torch.autocast`` in this dtype
            (a ``torch.dtype`` or its name, e.g. ``'bfloat16'``; set from the
            ``fp16`` config); None for full precision.
        channels_last: put the model (once) and every 4-D floating-point batch
            tensor in ``torch.channels_last`` memory format, which convolutions
            on tensor-core GPUs run faster in.
    """

    #: Whether ``__call__`` back-propagates (else the OptimizerHook does).
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

    def __call__(self, runner, batch: Any, train_mode: bool) -> Dict[str, Any]:
        raise NotImplementedError(f'{type(self).__name__} must implement '
                                  '__call__(runner, batch, train_mode) -> dict(loss, log_vars, '
                                  'num_samples)')

    # -- helpers that keep the contract ----------------------------------------
    def autocast(self, device: torch.device):
        if self.autocast_dtype is None:
            return nullcontext()
        return torch.autocast(device.type, dtype=self.autocast_dtype)

    def forward(self, runner, batch: Any) -> Any:
        """``runner.model_wrapper.train_step(batch)`` between the forward hook points, autocast."""
        hooked = runner.hooked_stages
        if 'before_forward' in hooked:
            runner.call_hook('before_forward')
        if self.autocast_dtype is None:
            output = runner.model_wrapper.train_step(batch)  # the common case: no context
        else:
            with self.autocast(runner.device):
                output = runner.model_wrapper.train_step(batch)
        if 'after_forward' in hooked:
            runner.call_hook('after_forward')
        return output

    def backward(self, runner, loss: torch.Tensor) -> None:
        """Back-propagate ``loss`` through the run's optimizer step, between the hook points."""
        hooked = runner.hooked_stages
        if 'before_backward' in hooked:
            runner.call_hook('before_backward')
        runner.optim_step.backward(loss, runner.iter)
        if 'after_backward' in hooked:
            runner.call_hook('after_backward')

    def evaluate(self, runner, batch: Any) -> Dict[str, Any]:
        """The eval-mode outputs: losses if the model returns them, else ``predictions``."""
        with self.autocast(runner.device):
            output = runner.model_wrapper.val_step(batch)
        if not _looks_like_losses(output):
            return {'predictions': output, 'num_samples': batch_size(batch)}
        loss, log_vars = parse_losses(output)
        return {'loss': loss, 'log_vars': log_vars, 'num_samples': batch_size(batch)}

    @staticmethod
    def grad_sync(runner, final: bool = True):
        """``model.no_sync()`` unless this backward is the one before an optimizer update.

        DDP decides at the forward whether the next backward all-reduces, so
        the forward of an accumulation micro-step (or of any but the ``final``
        batch of a step) runs inside ``no_sync()``.
        """
        step = runner.optim_step
        if final and (step is None or step.ends_window(runner.iter)):
            return nullcontext()
        return runner.model_wrapper.no_sync()

    def to_channels_last(self, runner, batch: Any) -> Any:
        """The batch with 4-D float tensors in channels_last; converts the model on first use."""
        if not self._model_in_channels_last:
            # In place (the parameters stay the same objects the optimizer holds).
            runner.model_wrapper.to(memory_format=torch.channels_last)
            self._model_in_channels_last = True
        if isinstance(batch, dict):
            return {k: self.to_channels_last(runner, v) for k, v in batch.items()}
        if isinstance(batch, (list, tuple)) and not hasattr(batch, '_fields'):
            return type(batch)(self.to_channels_last(runner, v) for v in batch)
        if isinstance(batch, torch.Tensor) and batch.dim() == 4 and batch.is_floating_point():
            return batch.contiguous(memory_format=torch.channels_last)
        return batch


def _looks_like_losses(output: Any) -> bool:
    return isinstance(output, dict) and any('loss' in k for k in output)
