"""Out-of-memory recovery that keeps the update: the micro-batch size, and one attempt at a batch.

``optimizer_config=dict(..., micro_batch='auto')``: when a batch's forward or
backward runs out of device memory, the batch processor puts everything back
as it was before the batch (:class:`Attempt`), halves the micro-batch size
(:class:`MicroBatchSize`, agreed by every rank) and runs the *same* samples
again as micro-batches whose gradients add up to the whole batch's; the
optimizer then steps once, as it would have. The size found is kept for the
following batches and stored in checkpoints. Off (the default), an
out-of-memory error ends the run with one line (:func:`out_of_memory_stop`).

This module knows nothing of batches or processors: the processor splits
the batch and calls the model (``processors/micro_batches.py``).
"""

from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist
from torch import nn

from ..utils import get_dist_info
from ..utils.dist import comm_device

SWITCH = "optimizer_config=dict(..., micro_batch='auto')"


class OutOfMemoryStop(torch.OutOfMemoryError):
    """The run stops for want of device memory; the message says what to change.

    A ``torch.OutOfMemoryError`` (``except torch.OutOfMemoryError`` still
    catches it) whose message is one line; ``tools/train.py`` prints it
    without a traceback. The original error is its ``__cause__``.
    """


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is a device running out of memory.

    ``torch.OutOfMemoryError`` (CUDA's, also ``torch.cuda.OutOfMemoryError``)
    or a ``RuntimeError`` saying "out of memory", as other backends (MPS,
    XPU, older builds) raise it.
    """
    return isinstance(error, torch.OutOfMemoryError) or (
        isinstance(error, RuntimeError) and 'out of memory' in str(error).lower())


def error_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0].rstrip('. ')


def out_of_memory_stop(error: BaseException, samples: Any, where: str) -> OutOfMemoryStop:
    """The one-line error for an out-of-memory ``error`` with micro-batching off."""
    return OutOfMemoryStop(
        f'out of memory in the {where} of a batch of {samples} samples per process '
        f'({error_line(error)}). Set {SWITCH} to run a batch that does not fit as micro-batches '
        'with the same update, or lower samples_per_gpu')


def check_micro_batch(value: Any) -> Any:
    """``value`` if it is None, ``'auto'`` or a positive integer, else a ValueError naming the key."""
    if value is None or value == 'auto' or (
            isinstance(value, int) and not isinstance(value, bool) and value > 0):
        return value
    raise ValueError(f"optimizer_config.micro_batch must be 'auto' (halve the micro-batch on out "
                     'of memory), a positive integer (a fixed micro-batch size) or None (off), '
                     f'got {value!r}')


class MicroBatchSize:
    """How many samples one forward/backward takes: the whole batch, or the size found.

    Args:
        setting: ``'auto'`` (start with the whole batch, halve on out of
            memory), an integer (that many samples, never changed: an
            out-of-memory error then stops the run) or None (off).

    ``size`` is None until a size is fixed or found; a checkpoint stores it
    and a resumed ``'auto'`` run starts from it.
    """

    def __init__(self, setting: Any = None) -> None:
        self.setting = check_micro_batch(setting)
        self.size: Optional[int] = setting if isinstance(setting, int) else None

    @property
    def enabled(self) -> bool:
        return self.setting is not None

    @property
    def auto(self) -> bool:
        return self.setting == 'auto'

    def for_batch(self, samples: int) -> int:
        """The micro-batch size for a batch of ``samples`` (the whole batch until one is found)."""
        return samples if self.size is None else min(self.size, samples)

    def agree(self, out_of_memory: bool, size: int) -> Tuple[bool, int]:
        """``(some rank ran out of memory, the next size)``: collective when distributed.

        Every rank calls it after every attempt, so one rank's out-of-memory
        error changes every rank's size and none waits alone in a collective.
        The next size is half the smallest size a rank used (0: none left).
        """
        halved = size // 2
        if get_dist_info()[1] == 1:
            return out_of_memory, halved
        flags = torch.tensor([int(out_of_memory), -halved], dtype=torch.int64,
                             device=comm_device())
        dist.all_reduce(flags, op=dist.ReduceOp.MAX)  # (any rank ran out; the smallest size)
        return bool(flags[0]), -int(flags[1])

    def state_dict(self) -> Dict[str, Any]:
        return {} if self.size is None else {'micro_batch': self.size}

    def load_state_dict(self, state: Dict[str, Any], logger: Any = None) -> None:
        if self.auto and state.get('micro_batch'):  # (a fixed size stays the config's)
            self.size = int(state['micro_batch'])
            if logger is not None:
                logger.info(f"micro_batch='auto': micro-batches of up to {self.size} samples, "
                            'as the checkpointed run found')


class Attempt:
    """What one attempt at a batch may change, kept so that an out-of-memory error changes nothing.

    Taken before the batch's first forward: the gradients accumulated so far
    (moved aside, not copied: the attempt's gradients start from None and are
    added to them by :meth:`commit`), a copy of the model's buffers
    (BatchNorm running statistics), torch's RNG states (dropout) and the
    step's record of finite losses. :meth:`rollback` puts them back, so the
    retry draws and updates what a run with the smaller micro-batches from
    the start would have.
    """

    def __init__(self, module: nn.Module, params: List[nn.Parameter], losses: Any) -> None:
        self._stash = [(p, p.grad) for p in params]
        for p in params:
            p.grad = None
        self._buffers = [(b, b.detach().clone()) for b in module.buffers()]
        self._rng = (torch.get_rng_state(),
                     torch.cuda.get_rng_state() if torch.cuda.is_initialized() else None)
        self._losses, self._finite = losses, losses.save()

    def rollback(self) -> None:
        """Forget the attempt: the earlier gradients, buffers, RNG and loss record come back."""
        for p, grad in self._stash:
            p.grad = grad
        for buffer, saved in self._buffers:
            buffer.copy_(saved)
        torch.set_rng_state(self._rng[0])
        if self._rng[1] is not None:
            torch.cuda.set_rng_state(self._rng[1])
        self._losses.restore(self._finite)

    def commit(self) -> None:
        """Keep the attempt: its gradients are added to the earlier ones (as autograd would)."""
        for p, grad in self._stash:
            if grad is not None:
                if p.grad is not None:
                    grad.add_(p.grad)
                p.grad = grad


def trainable_params(module: nn.Module, optimizer: Any) -> List[nn.Parameter]:
    """The model's trainable parameters, then any the optimizer(s) hold beyond them, each once."""
    found = {id(p): p for p in module.parameters() if p.requires_grad}
    for opt in optimizer.values() if isinstance(optimizer, dict) else [optimizer]:
        for group in opt.param_groups:
            for p in group['params']:
                found.setdefault(id(p), p)
    return list(found.values())


def average_gradients(params: List[nn.Parameter], bucket_mb: float = 25) -> None:
    """Average ``.grad`` over the ranks, as DDP's backward would have (a collective).

    Run once every rank has agreed that its attempt succeeded: syncing in the
    last backward (DDP's way) would leave the other ranks inside DDP's
    all-reduces if one rank ran out of memory there. A parameter some rank
    has a gradient for gets one on every rank (zeros where it took no part);
    one no rank used keeps ``None``. Gradients are divided by the world size
    and summed in buckets of about ``bucket_mb`` MB.
    """
    world_size = get_dist_info()[1]
    if world_size == 1:
        return
    used = torch.tensor([p.grad is not None for p in params], dtype=torch.int32,
                        device=comm_device())
    dist.all_reduce(used, op=dist.ReduceOp.MAX)
    grads = []
    for p, anyone in zip(params, used.tolist()):
        if anyone:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            grads.append(p.grad)
    for bucket in _buckets(grads, int(bucket_mb * 2**20)):
        flat = torch.cat([g.reshape(-1) for g in bucket]).div_(world_size)
        dist.all_reduce(flat)
        for g, part in zip(bucket, flat.split([g.numel() for g in bucket])):
            g.copy_(part.view_as(g))


def _buckets(grads: List[torch.Tensor], limit: int) -> List[List[torch.Tensor]]:
    """Consecutive gradients of one dtype and device, about ``limit`` bytes a bucket."""
    buckets: List[List[torch.Tensor]] = []
    size = 0
    for g in grads:
        last = buckets[-1] if buckets else None
        if last is None or size + g.numel() * g.element_size() > limit or \
                (g.dtype, g.device) != (last[0].dtype, last[0].device):
            buckets.append([])
            size = 0
        buckets[-1].append(g)
        size += g.numel() * g.element_size()
    return buckets
