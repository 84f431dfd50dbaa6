"""mmcv 1.x's step contract, checked where a user's code returns it.

A model with its own ``train_step`` (or an mmcv ``batch_processor``
function) returns ``dict(loss, log_vars, num_samples)``: ``loss`` the tensor
the ``OptimizerHook`` back-propagates, ``log_vars`` the values to log and
``num_samples`` their weight. A mistake there (``total_loss=`` instead of
``loss=``, ``loss.item()`` instead of the tensor, no ``num_samples``)
otherwise fails inside mtrain or torch with a ``KeyError`` or
``AttributeError`` traceback. Checked on every call: a few dict lookups.
"""

import numbers
from typing import Any, Callable, Dict

import torch

from ..utils import ConfigError

_SHAPE = 'dict(loss=<tensor>, log_vars=dict(...), num_samples=len(data["img_metas"]))'


class StepContractError(ConfigError, TypeError):
    """A step's outputs break the contract: a user mistake (no traceback in ``tools/train.py``)
    that is also the ``TypeError`` mmcv 1.x's runner raised for a non-dict."""


def check_step_outputs(outputs: Any, who: Callable[[], str], key: str, train_mode: bool,
                       needs_loss: bool) -> Dict[str, Any]:
    """Return ``outputs`` if it keeps the contract, else raise :class:`StepContractError`.

    Args:
        outputs: what the user's function returned.
        who: gives the user's function's name, e.g. ``'MyDetector.train_step'`` (asked
            only for a message: a step that keeps the contract formats nothing).
        key: the config key to name (``'model'`` or ``'batch_processor'``).
        train_mode: a training step (``loss`` matters) or a val step.
        needs_loss: an ``OptimizerHook`` will back-propagate ``outputs['loss']``.
    """
    if not isinstance(outputs, dict):
        _fail(f'{who()} must return a dict (loss, log_vars, num_samples), got '
              f'{type(outputs).__name__}: return {_SHAPE} (mmcv 1.x contract)', key)
    if train_mode and needs_loss:
        _check_loss(outputs, who, key)
    log_vars = outputs.get('log_vars')
    if log_vars is not None:
        if not isinstance(log_vars, dict):
            _fail(f'{who()} returned log_vars as a {type(log_vars).__name__}; it must be a dict '
                  'of name -> number or scalar tensor (what parse_losses returns)', key)
        if not isinstance(outputs.get('num_samples'), numbers.Integral):
            found = ('no num_samples' if 'num_samples' not in outputs else
                     f"num_samples={outputs['num_samples']!r}")
            _fail(f'{who()} returned log_vars with {found}; add the batch size, e.g. '
                  "num_samples=len(data['img_metas']), which weights the logged averages: "
                  f'{_SHAPE}', key)
    return outputs


def _check_loss(outputs: Dict[str, Any], who: Callable[[], str], key: str) -> None:
    loss = outputs.get('loss')
    if loss is None:
        others = [k for k in outputs if 'loss' in k]
        rename = f'; rename {others[0]!r} to loss' if others else ''
        _fail(f"{who()} returned no 'loss' (keys: {sorted(outputs)}){rename}. The OptimizerHook "
              f"back-propagates outputs['loss']: return {_SHAPE}, or set optimizer_config=None "
              f'if {who()} steps the optimizer itself', key)
    if not isinstance(loss, torch.Tensor):
        _fail(f'{who()} returned loss as a {type(loss).__name__} ({loss!r}), which cannot be '
              'back-propagated; return the loss tensor (not loss.item(): put numbers for the '
              'log in log_vars)', key)


def _fail(message: str, key: str) -> None:
    raise StepContractError(message, key=key)
