"""A half-accumulated window's gradients, into a checkpoint and back.

Inside an accumulation window ``.grad`` holds the sums of the window's
iterations so far; a resume must start from the same sums to make the same
update. Under DDP each rank holds its own, un-reduced sums, which rank 0
alone cannot save: writing a checkpoint therefore begins with a collective,
:func:`gather_window_grads`, that every rank calls (the runner does, in
``save_checkpoint``). Which parameters have gradients is read when the
checkpoint is written, from the optimizer's param groups: a parameter
unfrozen mid-run is saved like any other.
"""

from typing import Any, Dict, Iterator, List, Optional, Tuple

import torch
import torch.distributed as dist
from torch import nn

from ..utils import get_dist_info

Grads = Dict[str, torch.Tensor]


def optimizer_params(optimizer: torch.optim.Optimizer) -> Iterator[nn.Parameter]:
    """Every parameter the optimizer holds, read from its param groups now."""
    for group in optimizer.param_groups:
        yield from group['params']


def named_optimizer_params(optimizer: torch.optim.Optimizer,
                           model: Optional[nn.Module]) -> List[Tuple[str, nn.Parameter]]:
    """``(name, parameter)`` for the optimizer's parameters; ``param.<i>`` if not in ``model``."""
    names = {id(p): n for n, p in model.named_parameters()} if model is not None else {}
    return [(names.get(id(p), f'param.{i}'), p) for i, p in enumerate(optimizer_params(optimizer))]


def window_grads(optimizer: torch.optim.Optimizer, model: Optional[nn.Module]) -> Grads:
    """Name → ``.grad`` of every parameter that has one (empty outside a window)."""
    if not any(p.grad is not None for p in optimizer_params(optimizer)):
        return {}  # (outside a window: no names to look up)
    return {n: p.grad for n, p in named_optimizer_params(optimizer, model) if p.grad is not None}


def gather_window_grads(optimizer: torch.optim.Optimizer,
                        model: Optional[nn.Module]) -> Optional[List[Grads]]:
    """Every rank's window gradients, on the CPU, in rank order (a collective).

    None in one process or outside a window. Every rank calls it; the ranks
    are inside a window or outside it together (they run the same iterations).
    """
    world_size = get_dist_info()[1]
    local = window_grads(optimizer, model) if world_size > 1 else {}
    if not local:
        return None
    local = {n: g.detach().cpu() for n, g in local.items()}
    gathered: List[Any] = [None] * world_size
    dist.all_gather_object(gathered, local)
    return gathered


def grads_for_this_rank(state: Dict[str, Any], logger: Any = None) -> Grads:
    """The saved gradients this rank continues from (its own, or the ranks' mean)."""
    by_rank = state.get('grads_by_rank')
    if not by_rank:
        return state.get('grads') or {}
    rank, world_size = get_dist_info()
    if len(by_rank) == world_size:
        return by_rank[rank]
    if logger is not None:
        logger.warning(
            f'resuming inside an accumulation window on {world_size} process(es), saved '
            f'on {len(by_rank)}: each rank continues from the mean of the saved ranks\' '
            'gradients, so this one update is not bitwise the uninterrupted one')
    return {n: sum(g[n] for g in by_rank) / len(by_rank) for n in by_rank[0]}


def restore_window_grads(grads: Grads, optimizer: torch.optim.Optimizer,
                         model: Optional[nn.Module]) -> None:
    """Put saved window gradients back into ``.grad`` (a parameter frozen now gets its too)."""
    if not grads:
        return
    params = dict(named_optimizer_params(optimizer, model))
    unknown = sorted(set(grads) - set(params))
    if unknown:
        raise KeyError(f'the checkpoint holds accumulated gradients of parameters this '
                       f'model does not have: {unknown[:5]}')
    for name, grad in grads.items():
        param = params[name]
        param.grad = grad.to(device=param.device, dtype=param.dtype).clone()
