"""The checkpoint's data geometry, and an endless loader view for IterBasedRunner."""

from operator import attrgetter
from typing import Any, Dict, List, Optional

from .data_pass import DataPass, Geometry, Note, begin_pass


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


class IterLoader:
    """Yield batches forever; each pass over the loader is one epoch.

    At the start of every epoch the sampler is reseeded with ``set_epoch`` so
    each epoch has its own order, and ``consumed`` counts the batches taken
    from the current epoch; ``data_pass`` notes what fixed the epoch's order
    (:mod:`.data_pass`), which is what an exact resume needs.

    Args:
        data_loader: the loader to repeat.
        epoch: the epoch to start in (after a resume).
        start: batches of that epoch already consumed (after a resume).
        saved: the geometry that consumed them (see :func:`.data_pass.begin_pass`).
        data: the checkpoint's ``data`` entry (after a resume).
        role: the loader's workflow phase (``'train'``, ``'val'``), for resume notes.
    """

    def __init__(self, data_loader: Any, epoch: int = 0, start: int = 0,
                 saved: Optional[Geometry] = None, data: Optional[Dict[str, Any]] = None,
                 role: str = 'train') -> None:
        self._loader = data_loader
        self._role = role
        self._epoch = epoch
        self._start = start
        self._saved = saved
        self._data = data
        self._iter = None
        self.consumed = 0
        self.data_pass: Optional[DataPass] = None
        self.resume_notes: List[Note] = []

    epoch = property(attrgetter('_epoch'), doc='The pass batches come from now (read-only).')

    @property
    def batch_size(self) -> Optional[int]:
        return getattr(self._loader, 'batch_size', None)

    def __len__(self) -> int:
        return len(self._loader)

    def _begin_epoch(self) -> None:
        sampler = getattr(self._loader, 'sampler', None)
        if hasattr(sampler, 'set_epoch'):
            sampler.set_epoch(self._epoch)
        self._iter, self.data_pass, notes = begin_pass(self._loader, self._epoch, self._start,
                                                       self._saved, self._data, self._role)
        self.resume_notes += notes
        self.consumed = self.data_pass.index
        self._start, self._data = 0, None

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

    def close(self) -> None:
        """Let go of the pass's iterator when the run ends.

        Dropped here, a loader's worker processes are shut down at once. Left
        to the cyclic garbage collector (the runner and its hooks hold each
        other), torch's iterator is finalised with its queues already torn
        down, and each worker then costs a 5 s join timeout.
        """
        self._iter = None
