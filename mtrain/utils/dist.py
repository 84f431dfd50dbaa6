"""Rank and world size, and the few collectives mtrain needs (no-ops in one process).

Joining a process group is :func:`mtrain.utils.launch.init_dist`.
"""

import functools
from typing import Any, Callable, Dict, List, Optional, Tuple

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

    For values every rank holds in the same order (for logged values, matched
    by name, see :func:`sum_by_key`).
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


def sum_by_key(totals: Dict[str, Tuple[float, float]]) -> Dict[str, Tuple[float, float]]:
    """Each key's ``(sum, count)`` added up over the ranks that have the key.

    The log buffer's ``reduce_fn``, called at a log interval only. Ranks may
    log different keys (a task only some ranks' batches held), so values are
    matched by name, never by position: one ``all_gather_object`` of the
    small dict, then the additions on the host.
    """
    world_size = get_dist_info()[1]
    if world_size == 1:
        return dict(totals)
    gathered: List[Any] = [None] * world_size
    dist.all_gather_object(gathered, {k: (float(s), float(c)) for k, (s, c) in totals.items()})
    combined: Dict[str, Tuple[float, float]] = {}
    for rank_totals in gathered:  # rank order: the same float additions on every rank
        for key, (total, count) in rank_totals.items():
            old_total, old_count = combined.get(key, (0.0, 0.0))
            combined[key] = (old_total + total, old_count + count)
    return combined


def all_ranks_true(flag: torch.Tensor) -> bool:
    """Whether the boolean ``flag`` holds on every rank (one all-reduce; reads it back).

    For decisions every rank must take alike, e.g. skipping a step whose loss
    is not finite on some rank: if one rank skipped and another stepped,
    their weights would drift apart (or the stepping rank's all-reduce hang).
    """
    return bool(all_ranks_true_on_device(flag))


def all_ranks_true_on_device(flag: torch.Tensor) -> torch.Tensor:
    """:func:`all_ranks_true` left on the device: a bool tensor on ``flag``'s device.

    One all-reduce (MIN), and nothing is read back: under NCCL the host only
    queues it, so a device-side consumer (a fused optimizer's ``found_inf``)
    can use the verdict without a host sync. Under gloo a CUDA flag makes a
    round trip through the host (as :func:`all_ranks_true` does).
    """
    if get_dist_info()[1] == 1:
        return flag.detach()
    value = flag.detach().to(comm_device(), torch.int32)
    dist.all_reduce(value, op=dist.ReduceOp.MIN)
    return value.to(flag.device).bool()


def max_over_ranks(value: int) -> int:
    """The largest ``value`` any rank holds (one all-reduce; reads the result back).

    E.g. which signal, if any, some rank received: every rank then stops at
    the same iteration.
    """
    if get_dist_info()[1] == 1:
        return value
    tensor = torch.tensor([value], dtype=torch.int64, device=comm_device())
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return int(tensor)


def broadcast_object(obj: Any, src: int = 0) -> Any:
    """``obj`` as rank ``src`` has it, on every rank."""
    if get_dist_info()[1] == 1:
        return obj
    holder = [obj]
    dist.broadcast_object_list(holder, src=src)
    return holder[0]


def gather_to_main(obj: Any) -> Optional[List[Any]]:
    """Every rank's ``obj`` in rank order, on rank 0; None on the others.

    Collective: every rank must call it. For small picklable states each rank
    holds its own of (e.g. its RNG states, for a checkpoint rank 0 writes).
    """
    rank, world_size = get_dist_info()
    if world_size == 1:
        return [obj]
    gathered: Optional[List[Any]] = [None] * world_size if rank == 0 else None
    dist.gather_object(obj, gathered, dst=0)
    return gathered


def allreduce_grads(params: List[torch.nn.Parameter], coalesce: bool = True,
                    bucket_size_mb: int = -1) -> None:
    """Average the gradients of ``params`` over ranks in place (mmcv's ``allreduce_grads``).

    For code that reduces by hand (a model stepping its own optimizers under
    one process per GPU without DDP). ``coalesce`` / ``bucket_size_mb`` are
    accepted for mmcv's signature; each gradient is one all-reduce.
    """
    _allreduce_mean([p.grad for p in params if p.requires_grad and p.grad is not None])


def allreduce_params(params: List[torch.Tensor], coalesce: bool = True,
                     bucket_size_mb: int = -1) -> None:
    """Average ``params`` (parameters or buffers) over ranks in place (mmcv's ``allreduce_params``)."""
    _allreduce_mean([p.data for p in params])


def _allreduce_mean(tensors: List[torch.Tensor]) -> None:
    world_size = get_dist_info()[1]
    if world_size == 1:
        return
    for tensor in tensors:
        dist.all_reduce(tensor.div_(world_size))
