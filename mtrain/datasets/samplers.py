"""A DistributedSampler that also serves one process and can resume mid-epoch."""

from typing import Iterator, Optional

import torch
import torch.utils.data

from ..utils import get_dist_info


class DistributedSampler(torch.utils.data.DistributedSampler):
    """``torch.utils.data.DistributedSampler`` plus ``set_start_index``.

    The order of epoch ``e`` depends only on ``seed + e`` (``set_epoch`` is
    called by ``DistSamplerSeedHook``), so a resumed run sees the same order;
    ``set_start_index(n)`` makes the next pass skip its first ``n`` indices,
    which is how a run resumed mid-epoch continues with the very next batch.
    Rank and world size default to the current process group (one process:
    rank 0 of 1).
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

    def set_start_index(self, start: int) -> None:
        """Skip the first ``start`` indices of the next pass only."""
        self._start = start

    def __iter__(self) -> Iterator[int]:
        indices = list(super().__iter__())
        start, self._start = self._start, 0
        return iter(indices[start:])
