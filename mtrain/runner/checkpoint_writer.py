"""Writing checkpoints on a background thread: ``checkpoint_config = dict(async_save=True)``.

Serialising a large model and flushing it to disk takes seconds that the
training loop need not wait for. With ``async_save`` the runner takes a
snapshot of the run's state on the training thread (every tensor copied to
host memory, so the training that goes on cannot change what is written) and
a :class:`CheckpointWriter` thread writes it with the same crash-safe
temp-file-and-rename as a synchronous save, then moves ``latest.pth``.

One write is in flight at a time: the next checkpoint, a preemption save and
the end of the run each wait for it first, so ``latest.pth`` only ever moves
forward. A write that fails (a full disk) is raised at that wait, naming the
file; the previous checkpoint and ``latest.pth`` are left as they were.
The price is host memory for one extra copy of the state while it is written.
"""

import threading
from typing import Any, Callable, List, Optional

import numpy as np
import torch

from .checkpoint import CheckpointError


def snapshot(obj: Any) -> Any:
    """A copy of a checkpoint's nested dicts/lists whose tensors share no memory with the run."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to('cpu', copy=True)
    if isinstance(obj, np.ndarray):
        return obj.copy()
    if isinstance(obj, dict):
        copy = obj.copy()  # the same mapping type (dict, OrderedDict, defaultdict)
        for key, value in copy.items():
            copy[key] = snapshot(value)
        if hasattr(obj, '_metadata'):  # a module state_dict's version info
            copy._metadata = obj._metadata
        return copy
    if isinstance(obj, (list, tuple)) and not hasattr(obj, '_fields'):
        return type(obj)(snapshot(value) for value in obj)
    return obj


class CheckpointWriter:
    """Runs checkpoint-writing jobs on one background thread, one at a time.

    A sharded checkpoint is two jobs on rank 0: every rank's shards (started
    by the collective gather), then rank 0's file and the rename (queued with
    :meth:`then` by ``save_checkpoint``), so the loop waits for neither.
    """

    def __init__(self) -> None:
        self._thread: Optional[threading.Thread] = None
        self._path: Optional[str] = None
        self._error: Optional[BaseException] = None
        self._jobs: List[Callable[[], None]] = []
        self._lock = threading.Lock()

    def submit(self, path: str, job: Callable[[], None]) -> None:
        """Wait for the previous job, then run ``job`` (which writes ``path``) in the background."""
        self.wait()
        self._path, self._jobs = path, [job]
        # Not a daemon: an interpreter that exits normally finishes the write first.
        self._thread = threading.Thread(target=self._run, daemon=False,
                                        name='mtrain-checkpoint-writer')
        self._thread.start()

    def then(self, path: str, job: Callable[[], None]) -> None:
        """Run ``job`` after the job in flight, on the same thread (now if none is in flight).

        If the job in flight fails, ``job`` never runs (the error is raised at :meth:`wait`).
        """
        with self._lock:
            if self._thread is not None and self._jobs:  # still running what it was given
                self._path = path
                self._jobs.append(job)
                return
        self.submit(path, job)

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._jobs or self._error is not None:
                    self._jobs = []
                    return
                job = self._jobs[0]
            try:
                job()
            except BaseException as e:  # kept for the training thread, which raises it
                self._error = e
            with self._lock:
                self._jobs.pop(0)

    def wait(self) -> None:
        """Block until the jobs in flight are done; raise :class:`CheckpointError` if one failed."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise CheckpointError(f'writing checkpoint {self._path} in the background failed '
                                  f'({type(error).__name__}: {error}); the previous checkpoint '
                                  'and latest.pth were left as they were') from error
