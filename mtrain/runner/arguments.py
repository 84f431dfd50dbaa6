"""mmcv 1.x's checks of the runner's constructor arguments.

The same errors as mmcv's ``BaseRunner.__init__`` (``TypeError`` for a wrong
type, ``ValueError`` for ``max_epochs`` with ``max_iters``), raised before
anything is built, plus mtrain's own: a positive length, a wrapper that offers
``train_step``.
"""

import logging
import os
from typing import Any

import torch

from ..parallel import has_own_steps, is_module_wrapper, unwrap
from ..utils.errors import AssertedTypeError
from .batch_function import is_mmcv_batch_function


def check_runner_arguments(model: Any, batch_processor: Any, optimizer: Any, work_dir: Any,
                           logger: Any, meta: Any, max_iters: Any, max_epochs: Any) -> None:
    """Raise on an argument mmcv's runner refuses (see the module docstring)."""
    if batch_processor is not None and not callable(batch_processor):
        raise TypeError(f'batch_processor must be callable, but got {type(batch_processor)}')
    if is_mmcv_batch_function(batch_processor) and has_own_steps(unwrap(model)):
        raise RuntimeError('batch_processor and model.train_step()/model.val_step() cannot be '
                           "both available: the model's train_step already does the step")
    if is_module_wrapper(model) and not hasattr(model, 'train_step'):
        # mmcv asserts hasattr(model, 'train_step'): catchable as either
        raise AssertedTypeError(f'{type(model).__name__} has no train_step: pass the plain '
                                'model (the runner wraps it) or wrap it in '
                                'MMDistributedDataParallel')
    _check_optimizer(optimizer)
    if logger is not None and not isinstance(logger, logging.Logger):
        raise TypeError(f'logger must be a logging.Logger object, but got {type(logger)}')
    if meta is not None and not isinstance(meta, dict):
        raise TypeError(f'meta must be a dict or None, but got {type(meta)}')
    if work_dir is not None and not isinstance(work_dir, (str, os.PathLike)):
        raise TypeError(f'"work_dir" must be a str or None, got {type(work_dir)}')
    if max_epochs is not None and max_iters is not None:
        raise ValueError('Only one of `max_epochs` or `max_iters` can be set: give the runner '
                         'max_epochs or max_iters, not both')
    for name, value in (('max_epochs', max_epochs), ('max_iters', max_iters)):
        if value is not None and (not isinstance(value, int) or value <= 0):
            raise ValueError(f'runner {name} must be a positive integer, got {value!r}')


def _check_optimizer(optimizer: Any) -> None:
    if isinstance(optimizer, dict):
        for name, optim in optimizer.items():
            if not isinstance(optim, torch.optim.Optimizer):
                raise TypeError(f'optimizer must be a dict of torch.optim.Optimizers, but '
                                f'optimizer["{name}"] is a {type(optim)}')
    elif optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f'optimizer must be a torch.optim.Optimizer object or dict or None, '
                        f'but got {type(optimizer)}')
