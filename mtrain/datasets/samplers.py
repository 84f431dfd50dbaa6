"""A DistributedSampler that also serves one process and can resume mid-epoch."""

import math
from typing import Iterator, List, Optional

import torch
import torch.utils.data

from ..utils import get_dist_info


class DistributedSampler(torch.utils.data.DistributedSampler):
    """``torch.utils.data.DistributedSampler`` plus ``set_start_sample``.

    The order of epoch ``e`` depends only on ``seed + e`` (``set_epoch`` is
    called by ``DistSamplerSeedHook``), so a resumed run sees the same order.
    Rank ``r`` of ``W`` takes positions ``r, r + W, ...`` of the epoch's
    global order, so after ``k`` batches of ``b`` on every rank the run has
    consumed exactly the first ``k * b * W`` positions: ``set_start_sample(n)``
    makes the next pass share out what follows position ``n`` among this
    run's ranks, which is how a run resumed mid-epoch continues with the very
    next samples, on the same number of processes or another. Rank and world
    size default to the current process group (one process: rank 0 of 1).
    """

    def __init__(self, dataset, num_replicas: Optional[int] = None, rank: Optional[int] = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        default_rank, default_world = get_dist_info()
        super().__init__(dataset, num_replicas=num_replicas or default_world,
                         rank=default_rank if rank is None else rank, shuffle=shuffle,
                         seed=seed, drop_last=drop_last)
        self._start = 0
        # The loader's own generator (worker seeds) follows the epoch too, so the
        # global RNG is never consumed by starting an epoch (see build_dataloader).
        self.loader_generator: Optional[torch.Generator] = None
        self.set_epoch(0)

    def set_epoch(self, epoch: int) -> None:
        super().set_epoch(epoch)
        if self.loader_generator is not None:
            self.loader_generator.manual_seed(self.seed + epoch)

    def set_start_sample(self, position: int) -> None:
        """Begin the next pass (only) at ``position`` of the epoch's global order."""
        self._start = position

    def set_start_index(self, start: int) -> None:
        """Skip this rank's first ``start`` indices of the next pass (same world size)."""
        self._start = start * self.num_replicas

    def global_order(self) -> List[int]:
        """The epoch's positions for all ranks, padded or cut as torch's sampler does."""
        if self.shuffle:
            g = torch.Generator()
            g.manual_seed(self.seed + self.epoch)
            indices = torch.randperm(len(self.dataset), generator=g).tolist()
        else:
            indices = list(range(len(self.dataset)))
        if self.drop_last:
            return indices[:self.total_size]
        padding = self.total_size - len(indices)
        return indices + (indices * math.ceil(padding / len(indices)))[:padding]

    def __iter__(self) -> Iterator[int]:
        start, self._start = self._start, 0
        if start == 0:
            return super().__iter__()
        rest = self.global_order()[start:]
        # Equal shares for every rank (DDP steps together): pad with the first of the rest.
        rest += (rest * self.num_replicas)[:(-len(rest)) % self.num_replicas]
        return iter(rest[self.rank::self.num_replicas])
