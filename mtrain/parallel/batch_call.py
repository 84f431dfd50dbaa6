"""How a batch becomes the arguments of a model call (the model contract).

A model follows one of two contracts, decided by one rule: **a model that
defines its own ``train_step`` follows mmcv 1.x's contract**, any other
model follows mtrain's.

- mtrain's: ``forward`` takes the batch (a dict as keywords, a tuple as
  positional arguments) and returns its losses; the batch processor sums
  them and the ``OptimizerHook`` does backward and step.
- mmcv 1.x's: ``model.train_step(data_batch, optimizer, **kwargs)`` and
  ``val_step(...)`` return ``dict(loss, log_vars, num_samples)`` themselves;
  the ``OptimizerHook`` backwards ``outputs['loss']``, or the model steps its
  optimizers itself (GAN-style, ``optimizer_config=None``).
"""

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from torch import nn


def call_with_batch(fn: Callable, batch: Any) -> Any:
    """Call ``fn`` with a dict batch as keywords, a list/tuple as positional args,
    anything else as the single argument."""
    if isinstance(batch, dict):
        return fn(**batch)
    if isinstance(batch, (list, tuple)):
        return fn(*batch)
    return fn(batch)


def has_own_steps(module: nn.Module) -> bool:
    """Whether ``module`` (the user's model) follows mmcv 1.x's contract: it has ``train_step``."""
    return callable(getattr(module, 'train_step', None))


@contextmanager
def forward_as(module: nn.Module, step: str) -> Iterator[None]:
    """Make the next ``module(...)`` run ``module.<step>(...)`` instead of ``forward``.

    So a wrapper's own forward machinery (DDP's buffer broadcast and
    gradient-reduction setup) runs around the user's ``train_step``, as
    mmcv's ``MMDistributedDataParallel.train_step`` does by hand. Only the
    outermost call is redirected: the step's own ``self(**data)`` reaches
    the real ``forward``.
    """
    def run_step(*args: Any, **kwargs: Any) -> Any:
        del module.forward  # an instance attribute shadowing the class's forward, used once
        return getattr(module, step)(*args, **kwargs)

    module.forward = run_step
    try:
        yield
    finally:
        module.__dict__.pop('forward', None)
