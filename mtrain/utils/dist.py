"""Rank and world size without requiring torch.distributed to be initialised."""

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


def collect_results(part: torch.Tensor, size: int) -> torch.Tensor:
    """Every rank's predictions, in dataset order, without sampler padding.

    Assumes each rank evaluated ``DistributedSampler(shuffle=False)``'s share
    (rank r holds samples r, r+W, r+2W, ...; all shares padded to one length),
    so interleaving the gathered shares restores the dataset order and the
    first ``size`` rows are each sample exactly once.
    """
    rank, world_size = get_dist_info()
    if world_size == 1:
        return part[:size].cpu()
    gathered = [torch.empty_like(part) for _ in range(world_size)]
    dist.all_gather(gathered, part.contiguous())
    ordered = torch.stack(gathered, dim=1).reshape(-1, *part.shape[1:])
    return ordered[:size].cpu()


def broadcast_object(obj: Any, src: int = 0) -> Any:
    """``obj`` as rank ``src`` has it, on every rank."""
    if get_dist_info()[1] == 1:
        return obj
    holder = [obj]
    dist.broadcast_object_list(holder, src=src)
    return holder[0]
