"""The model contract's loss parsing (mmcv 1.x ``parse_losses`` semantics)."""

import numbers
from typing import Any, Dict, Tuple

import torch


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
    for name, value in output.items():
        if isinstance(value, torch.Tensor):
            log_vars[name] = value if value.dim() == 0 else value.mean()  # no op for a scalar
        elif isinstance(value, (list, tuple)) and all(isinstance(v, torch.Tensor) for v in value):
            log_vars[name] = sum(v.mean() for v in value)
        elif isinstance(value, numbers.Number):
            log_vars[name] = value
        else:
            raise TypeError(f"model output '{name}' is a {type(value).__name__}; losses and "
                            'logged values must be tensors, lists of tensors or numbers')
    loss_terms = [v for k, v in log_vars.items() if 'loss' in k]
    if not loss_terms:
        raise KeyError(f"the model returned no entry whose key contains 'loss' (keys: "
                       f'{sorted(output)}); name at least one loss term e.g. loss_cls')
    loss = loss_terms[0]
    for term in loss_terms[1:]:  # not sum(): that adds a 0 first, one more op per step
        loss = loss + term
    log_vars['loss'] = loss
    log_vars = {k: v.detach() if isinstance(v, torch.Tensor) else v for k, v in log_vars.items()}
    return loss, log_vars
