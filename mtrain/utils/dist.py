"""Rank and world size, and the few collectives mtrain needs (no-ops in one process).

Joining a process group is :func:`mtrain.utils.launch.init_dist`.
"""

import functools
from typing import Any, Callable, Tuple

import torch
import torch.distributed as dist


def get_dist_info() -> Tuple[int, int]:
    """``(rank, world_size)``; ``(0, 1)`` when not running distributed."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def is_main_process() -> bool:
    return get_dist_info()[0] == 0


def master_only(func: Callable) -> Callable:
    """Run ``func`` on rank 0 only (returns None elsewhere)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if is_main_process():
            return func(*args, **kwargs)
        return None

    return wrapper


def comm_device() -> torch.device:
    """Where tensors must be for a collective: the current GPU under NCCL, else the CPU."""
    if dist.get_backend() == 'nccl':
        return torch.device('cuda', torch.cuda.current_device())
    return torch.device('cpu')


def all_reduce_mean(tensor: torch.Tensor) -> torch.Tensor:
    """The mean of ``tensor`` over all ranks (a new tensor on ``tensor``'s device).

    The log buffer's ``reduce_fn``: it reduces its sums and counts with this at
    a log interval only, so logged losses are means over all ranks' samples.
    """
    world_size = get_dist_info()[1]
    if world_size == 1:
        return tensor
    full_tensor = getattr(tensor, 'full_tensor', None)
    if full_tensor is not None:  # a DTensor (an FSDP grad norm got into the log): make it whole
        tensor = full_tensor()
    reduced = tensor.detach().to(comm_device(), copy=True)
    dist.all_reduce(reduced)
    return reduced.div_(world_size).to(tensor.device)


def all_ranks_true(flag: torch.Tensor) -> bool:
    """Whether the boolean ``flag`` holds on every rank (one all-reduce; reads it back).

    For decisions every rank must take alike, e.g. skipping a step whose loss
    is not finite on some rank: if one rank skipped and another stepped,
    their weights would drift apart (or the stepping rank's all-reduce hang).
    """
    if get_dist_info()[1] == 1:
        return bool(flag)
    value = flag.detach().to(comm_device(), torch.int32)
    dist.all_reduce(value, op=dist.ReduceOp.MIN)
    return bool(value)


def broadcast_object(obj: Any, src: int = 0) -> Any:
    """``obj`` as rank ``src`` has it, on every rank."""
    if get_dist_info()[1] == 1:
        return obj
    holder = [obj]
    dist.broadcast_object_list(holder, src=src)
    return holder[0]
