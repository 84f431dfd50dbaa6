"""Which worker runs which trial: no trial twice, and none left behind by a dead process.

Each trial has a folder ``<sweep work dir>/trial_NNNN`` and, while a process works on
it, an exclusive ``flock`` on ``trial_NNNN/.lock``. The training process inherits the
locked file, so the lock is held as long as the sweep worker *or* its training run
lives; the operating system drops it when both are gone, even after ``kill -9``.

Policy for a trial left ``RUNNING`` in the study (docs/sweeps.md): a worker that can
take its lock *adopts* it: the same trial (number, parameters, seed, folder) is
resumed from its last checkpoint with ``--auto-resume``, so it ends as it would have
without the interruption. A trial whose folder this machine cannot see (a worker on
another machine with its own disk) is left to that machine. New trials are asked from
Optuna only while the study has fewer than ``--trials`` trials, under one lock per
sweep folder, so workers sharing the folder never ask for more.
"""

import datetime
import fcntl
import os
import os.path as osp
import socket
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

from .space import Distribution

#: A RUNNING trial that never got its folder is adopted after this long (its worker
#: died between asking Optuna and creating the folder, or lives on another machine).
ORPHAN_AGE = datetime.timedelta(seconds=60)


class FileLock:
    """An exclusive ``flock`` on ``path`` (created if missing)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: Optional[int] = None

    def acquire(self, blocking: bool = True) -> bool:
        os.makedirs(osp.dirname(self.path), exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return False
        self.fd = fd
        return True

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # drops this process's hold; a child's inherited copy keeps it
            self.fd = None

    def __enter__(self) -> 'FileLock':
        self.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


@dataclass
class Claim:
    """A trial this worker now runs: ``adopted`` when it resumes one left running.

    ``trial_id`` is Optuna's storage id (``FrozenTrial._trial_id``, which Optuna's own
    integrations use to reopen a trial).
    """
    number: int
    trial_id: int
    params: Dict[str, Any]
    work_dir: str
    lock: FileLock
    adopted: bool


def sweep_lock(sweep_dir: str) -> FileLock:
    """The lock that serializes the sweep folder's workers when they claim (or create) trials."""
    return FileLock(osp.join(sweep_dir, '.claim.lock'))


def trial_dir(sweep_dir: str, number: int) -> str:
    return osp.join(sweep_dir, f'trial_{number:04d}')


def claim_trial(study: Any, sweep_dir: str, space: Dict[str, Distribution], total: int,
                sampler_for: Optional[Callable[[int], Any]] = None) -> Optional[Claim]:
    """Adopt a trial left running, else ask Optuna for a new one; None when the study is full.

    ``sampler_for(n)``: the sampler to ask with when the study has ``n`` trials (default:
    the study's own).
    """
    with sweep_lock(sweep_dir):
        for frozen in study.get_trials(deepcopy=False):
            if frozen.state.name == 'RUNNING':
                claim = _adopt(study, frozen, sweep_dir)
                if claim is not None:
                    return claim
        started = [t for t in study.get_trials(deepcopy=False) if t.state.name != 'WAITING']
        if len(started) >= total:
            return None
        if sampler_for is not None:
            study.sampler = sampler_for(len(study.get_trials(deepcopy=False)))
        trial = study.ask({key: dist.to_optuna() for key, dist in space.items()})
        work_dir = trial_dir(sweep_dir, trial.number)
        lock = FileLock(osp.join(work_dir, '.lock'))
        lock.acquire()
        _mark_owner(trial, work_dir)
        return Claim(trial.number, trial._trial_id, dict(trial.params), work_dir, lock, False)


def _adopt(study: Any, frozen: Any, sweep_dir: str) -> Optional[Claim]:
    work_dir = frozen.user_attrs.get('work_dir')
    if work_dir is None:
        started = frozen.datetime_start
        if started is None or datetime.datetime.now() - started < ORPHAN_AGE:
            return None
        work_dir = trial_dir(sweep_dir, frozen.number)
    elif not osp.isdir(work_dir):
        return None  # another machine's folder
    lock = FileLock(osp.join(work_dir, '.lock'))
    if not lock.acquire(blocking=False):
        return None  # its worker or its training run is alive
    if not _still_running(study, frozen.number):
        # Its worker told the study and let go of the lock after our list was read.
        lock.release()
        return None
    return Claim(frozen.number, frozen._trial_id, dict(frozen.params), work_dir, lock, True)


def _still_running(study: Any, number: int) -> bool:
    """The trial's state as the storage holds it now (read again, under its lock)."""
    return any(t.number == number and t.state.name == 'RUNNING'
               for t in study.get_trials(deepcopy=False))


def _mark_owner(trial: Any, work_dir: str) -> None:
    trial.set_user_attr('work_dir', work_dir)
    trial.set_user_attr('host', socket.gethostname())
