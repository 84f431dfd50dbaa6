"""The model contract's loss parsing (mmcv 1.x ``parse_losses`` semantics)."""

import numbers
from typing import Any, Dict, Tuple

import torch

from ..utils import ConfigError


def parse_losses(output: Any) -> Tuple[torch.Tensor, Dict[str, Any]]:
    """Split a train-mode model output into the total loss and values to log.

    A tensor is the loss itself. In a dict, every entry whose key contains
    ``loss`` is summed into the total (a list of tensors counts as the sum of
    their means); the other entries are only logged. Nothing here reads a
    value back to the host: logged values stay detached device tensors.

    Returns:
        ``(loss, log_vars)`` where ``log_vars['loss']`` is the total.
    """
    if isinstance(output, torch.Tensor):
        return output, {'loss': output.detach()}
    if not isinstance(output, dict):
        raise TypeError('in train mode the model must return a loss tensor or a dict of '
                        f'losses, but it returned {type(output).__name__}')
    log_vars: Dict[str, Any] = {}
    loss = logged_loss = None
    for name, value in output.items():
        if isinstance(value, torch.Tensor):
            if value.dim():  # (no op for a scalar)
                value = value.mean()
            logged = value.detach()
        elif isinstance(value, (list, tuple)) and all(isinstance(v, torch.Tensor) for v in value):
            value = sum(v.mean() for v in value)
            logged = value.detach()
        elif isinstance(value, numbers.Number):
            if 'loss' in name:  # a float cannot be back-propagated (mmcv: a TypeError)
                raise ConfigError(f"in train mode the model returned '{name}' as a "
                                  f'{type(value).__name__} ({value!r}), which cannot be '
                                  'back-propagated; return the loss tensor, not loss.item() '
                                  "(a number to log goes under a name without 'loss')",
                                  key='model')
            logged = value
        else:
            raise TypeError(f"model output '{name}' is a {type(value).__name__}; losses and "
                            'logged values must be tensors, lists of tensors or numbers')
        log_vars[name] = logged
        if 'loss' in name:
            if loss is None:  # one term: the total is that term, no addition, no second detach
                loss, logged_loss = value, logged
            else:  # not sum(): that adds a 0 first, one more op per step
                loss, logged_loss = loss + value, None
    if loss is None:
        raise ConfigError(f"in train mode the model returned no entry whose key contains 'loss' "
                          f'(keys: {sorted(output)}); name at least one loss term, e.g. '
                          "loss_cls (docs/your_own_model_and_data.md)", key='model')
    log_vars['loss'] = logged_loss if logged_loss is not None else _detach(loss)
    return loss, log_vars


def _detach(value: Any) -> Any:
    return value.detach() if isinstance(value, torch.Tensor) else value
