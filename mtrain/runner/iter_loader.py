"""An endless view of a data loader that counts epochs, for IterBasedRunner."""

from typing import Any


class IterLoader:
    """Yield batches forever; each pass over the loader is one epoch.

    At the start of every epoch the sampler is reseeded with ``set_epoch`` so
    each epoch has its own order, and ``consumed`` counts the batches taken
    from the current epoch, which is what an exact resume needs.

    Args:
        data_loader: the loader to repeat.
        epoch: the epoch to start in (after a resume).
        start: batches of that epoch already consumed (after a resume).
    """

    def __init__(self, data_loader: Any, epoch: int = 0, start: int = 0) -> None:
        self._loader = data_loader
        self._epoch = epoch
        self._start = start
        self._iter = None
        self.consumed = 0

    @property
    def epoch(self) -> int:
        return self._epoch

    def __len__(self) -> int:
        return len(self._loader)

    def _begin_epoch(self) -> None:
        sampler = getattr(self._loader, 'sampler', None)
        if hasattr(sampler, 'set_epoch'):
            sampler.set_epoch(self._epoch)
        start, self._start = self._start, 0
        skip_in_sampler = hasattr(sampler, 'set_start_index') and self._loader.batch_size
        if start and skip_in_sampler:
            sampler.set_start_index(start * self._loader.batch_size)
        self._iter = iter(self._loader)
        if start and not skip_in_sampler:
            for _ in range(start):  # any other loader: read and drop the consumed batches
                next(self._iter, None)
        self.consumed = start

    def __next__(self) -> Any:
        if self._iter is None:
            self._begin_epoch()
        try:
            batch = next(self._iter)
        except StopIteration:
            self._epoch += 1
            self._begin_epoch()
            batch = next(self._iter)
        self.consumed += 1
        return batch

    def __iter__(self):
        return self
