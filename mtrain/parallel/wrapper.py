"""The single-process model wrapper: the interface every wrapper offers.

The runner and the batch processors only ever talk to a wrapper:
``train_step(batch)`` / ``val_step(batch)`` / ``test_step(batch)`` run the
forward, ``no_sync()`` suspends gradient synchronisation (a no-op here), and
``module`` is the user's model. :class:`MTDistributedDataParallel` offers the
same methods over ``torch.nn.parallel.DistributedDataParallel``, so no code
path branches on whether a run is distributed.
"""

from contextlib import nullcontext
from typing import Any

from torch import nn

from ..registry import MODEL_WRAPPERS
from .batch_call import call_with_batch


@MODEL_WRAPPERS.register_module()
class ModelWrapper(nn.Module):
    """Wrap ``module`` for a single process (CPU or one GPU)."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, *args, **kwargs) -> Any:
        return self.module(*args, **kwargs)

    # The steps call the user's model directly: going through this wrapper's own
    # ``__call__`` would add a second module call per step, and ``self.module``
    # a Python-level ``nn.Module.__getattr__``; ``_modules`` is a plain dict.
    def train_step(self, batch: Any) -> Any:
        """Forward ``batch`` in train mode; returns the model's losses."""
        return call_with_batch(self._modules['module'], batch)

    def val_step(self, batch: Any) -> Any:
        """Forward ``batch`` for the val workflow phase / evaluation."""
        return call_with_batch(self._modules['module'], batch)

    def test_step(self, batch: Any) -> Any:
        return call_with_batch(self._modules['module'], batch)

    def no_sync(self):
        """Nothing to synchronise in one process."""
        return nullcontext()
