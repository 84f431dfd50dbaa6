"""One batch per training step: the default batch processor."""

from contextlib import nullcontext
from typing import Any, Dict, Optional

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
            (set from the ``fp16`` config); None for full precision.
    """

    #: The OptimizerHook does the backward for this processor.
    does_backward = False

    def __init__(self, autocast_dtype: Optional[torch.dtype] = None) -> None:
        self.autocast_dtype = autocast_dtype

    def autocast(self, device: torch.device):
        if self.autocast_dtype is None:
            return nullcontext()
        return torch.autocast(device.type, dtype=self.autocast_dtype)

    def __call__(self, runner, batch: Any, train_mode: bool) -> Dict[str, Any]:
        batch = to_device(batch, runner.device)
        step = runner.model.train_step if train_mode else runner.model.val_step
        with self.autocast(runner.device):
            output = step(batch)
        return self.collect(output, batch, train_mode)

    @staticmethod
    def collect(output: Any, batch: Any, train_mode: bool) -> Dict[str, Any]:
        """Turn a model output into the processor's outputs dict."""
        if not train_mode and not _looks_like_losses(output):
            return {'predictions': output, 'num_samples': batch_size(batch)}
        loss, log_vars = parse_losses(output)
        return {'loss': loss, 'log_vars': log_vars, 'num_samples': batch_size(batch)}


def _looks_like_losses(output: Any) -> bool:
    return isinstance(output, dict) and any('loss' in k for k in output)
