"""Which parameters a loss does not depend on (what DDP calls unused parameters)."""

from typing import Any, List

import torch
from torch import nn

from .logging import get_logger


def unused_parameters(output: Any, module: nn.Module) -> List[str]:
    """``'name with shape (..)'`` of each trainable parameter the losses in ``output`` skip.

    ``output`` is a loss tensor or what the model returned: a dict whose keys
    containing ``loss`` hold tensors or lists of tensors. Walks the autograd
    graph (slow): for debugging, not for every step of a real run.
    """
    roots = [t.grad_fn for t in _loss_tensors(output) if t.grad_fn is not None]
    seen, used = set(), set()
    while roots:
        fn = roots.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        if hasattr(fn, 'variable'):  # AccumulateGrad: its leaf is a parameter
            used.add(id(fn.variable))
        roots.extend(next_fn for next_fn, _ in fn.next_functions)
    return [f'{name} with shape {tuple(p.shape)}' for name, p in module.named_parameters()
            if p.requires_grad and id(p) not in used]


def log_unused_parameters(output: Any, module: nn.Module, logger=None) -> None:
    """Log one error line per parameter :func:`unused_parameters` finds."""
    for entry in unused_parameters(output, module):
        (logger or get_logger()).error(f'{entry} is not in the computational graph of the '
                                       'loss (an unused parameter for DDP)')


def _loss_tensors(output: Any) -> List[torch.Tensor]:
    if isinstance(output, torch.Tensor):
        return [output]
    if not isinstance(output, dict):
        return []
    tensors = []
    for key, value in output.items():
        if 'loss' not in key:
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, torch.Tensor):
                tensors.append(item)
    return tensors
