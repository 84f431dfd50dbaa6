"""Where a resumed epoch continues, and an endless loader view for IterBasedRunner."""

import itertools
from typing import Any, Dict, Iterable, Optional, Tuple

from ..utils import get_dist_info

# How the checkpointed run drew its batches: (world size, samples per process).
Geometry = Tuple[int, int]


def saved_geometry(progress: Dict[str, Any], world_size: int, logger) -> Optional[Geometry]:
    """``(world size, samples per process)`` the checkpoint's run drew batches with.

    Said in one line when the world size changed: the sample position carries
    over exactly, the rest (see docs/robustness.md) cannot.
    """
    if progress.get('samples_per_gpu') is None:
        return None  # written before mtrain stored it: assume this run's geometry
    saved = (progress['world_size'], progress['samples_per_gpu'])
    if saved[0] != world_size:
        logger.warning(f'resuming a {saved[0]}-process run on {world_size}: the epoch continues '
                       'at the exact sample, but batches are composed differently, so the run '
                       'is not bitwise the one it would have been (docs/robustness.md: rescale '
                       'lr or the schedule if the global batch changed)')
    return saved


def resume_batches(data_loader: Any, start: int,
                   saved: Optional[Geometry] = None) -> Tuple[Iterable, int, Optional[str]]:
    """The loader from the first sample a run that consumed ``start`` batches had not seen.

    ``saved`` is the world size and per-process batch size of the run that
    consumed them (default: this run's). Before a resume the ranks together
    consumed the first ``start * batch * world`` samples of the epoch's
    order; mtrain's sampler continues exactly after them on any number of
    processes (no data is loaded for the skipped ones).

    Returns:
        ``(batches, index, note)``: the batches to iterate, the index of the
        first in this run's epoch, and a one-line note when the continuation
        is not exact (else None).
    """
    if start == 0:
        return data_loader, 0, None
    batch_size, world_size = data_loader.batch_size, get_dist_info()[1]
    old_world, old_batch = saved or (world_size, batch_size)
    position = start * old_batch * old_world
    sampler = getattr(data_loader, 'sampler', None)
    if hasattr(sampler, 'set_start_sample') and batch_size is not None:
        sampler.set_start_sample(position)
        return data_loader, position // (batch_size * world_size), None
    note = None
    if (old_world, old_batch) != (world_size, batch_size):
        note = (f'resume is not sample-exact: the checkpoint was written by {old_world} '
                f'process(es) x {old_batch} samples, this run has {world_size} x {batch_size} '
                f'and its loader has no mtrain sampler, so it skips {start} of its own batches')
    # Any other loader: read the consumed batches and drop them.
    return itertools.islice(data_loader, start, None), start, note


class IterLoader:
    """Yield batches forever; each pass over the loader is one epoch.

    At the start of every epoch the sampler is reseeded with ``set_epoch`` so
    each epoch has its own order, and ``consumed`` counts the batches taken
    from the current epoch, which is what an exact resume needs.

    Args:
        data_loader: the loader to repeat.
        epoch: the epoch to start in (after a resume).
        start: batches of that epoch already consumed (after a resume).
        saved: the geometry that consumed them (see :func:`resume_batches`).
    """

    def __init__(self, data_loader: Any, epoch: int = 0, start: int = 0,
                 saved: Optional[Geometry] = None) -> None:
        self._loader = data_loader
        self._epoch = epoch
        self._start = start
        self._saved = saved
        self._iter = None
        self.consumed = 0
        self.resume_note: Optional[str] = None

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def batch_size(self) -> Optional[int]:
        return getattr(self._loader, 'batch_size', None)

    def __len__(self) -> int:
        return len(self._loader)

    def _begin_epoch(self) -> None:
        sampler = getattr(self._loader, 'sampler', None)
        if hasattr(sampler, 'set_epoch'):
            sampler.set_epoch(self._epoch)
        batches, self.consumed, self.resume_note = resume_batches(self._loader, self._start,
                                                                  self._saved)
        self._start = 0
        self._iter = iter(batches)

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
