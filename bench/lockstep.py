"""Two training loops in two threads taking turns epoch by epoch: ``train_py.py --lockstep``.

On a CPU shared with other jobs the time a loop takes moves with their load
by far more than the few per cent measured here, and the load changes from
one second to the next. Runs taken one after the other then compare a quiet
second with a busy one. In lockstep, the two loops run in one process, one
thread each, and hand over to each other after every epoch: only one runs at
a time (the other waits on a semaphore, using no CPU), so each loop's epoch
``k`` is timed with the process's CPU clock right next to the other's epoch
``k``, under the same load, and each pair gives one ratio.
"""

import threading
from typing import Callable, Dict, List, Tuple

#: How long a loop waits for its turn before the bench gives up (a loop that failed).
TIMEOUT_S = 600


class Lockstep:
    """Turns between ``first`` and ``second``; ``epochs[side]`` the seconds of each epoch.

    Each side calls :meth:`start` once before its first batch and
    :meth:`mark` after every epoch's last iteration. ``first`` runs until
    its first mark, then ``second`` until its first, and so on. The last
    mark of ``second`` lets ``first`` go on without waiting itself, so both
    finish (their ends, the checkpoints, are not paired).
    """

    def __init__(self, first: str, second: str, epochs: int, clock: Callable[[], float]) -> None:
        self.first, self.second = first, second
        self.clock = clock
        self.turn = {first: threading.Semaphore(0), second: threading.Semaphore(0)}
        self.left = {first: epochs, second: epochs}
        self.since: Dict[str, float] = {}
        self.epochs: Dict[str, List[float]] = {first: [], second: []}

    def start(self, side: str) -> None:
        if side == self.second:
            self._wait(side)
        self.since[side] = self.clock()

    def mark(self, side: str) -> None:
        now = self.clock()
        self.epochs[side].append(now - self.since[side])
        self.left[side] -= 1
        self.turn[self.second if side == self.first else self.first].release()
        if side == self.first or self.left[side] > 0:
            self._wait(side)
        self.since[side] = self.clock()

    def _wait(self, side: str) -> None:
        if not self.turn[side].acquire(timeout=TIMEOUT_S):
            raise RuntimeError(f'lockstep: {side} waited {TIMEOUT_S} s for its turn')


def run_paired(lockstep: Lockstep, in_thread: Callable[[], None],
               in_main: Callable[[], None]) -> None:
    """``in_thread()`` in a new thread and ``in_main()`` here, in lockstep; re-raises a failure."""
    failed: List[BaseException] = []

    def target() -> None:
        try:
            in_thread()
        except BaseException as e:  # (reported by the main thread)
            failed.append(e)
            for turn in lockstep.turn.values():
                turn.release()

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    try:
        in_main()
    finally:
        thread.join(TIMEOUT_S)
    if failed:
        raise failed[0]


def paired_ratios(epochs_a: List[float], epochs_b: List[float]) -> Tuple[List[float], List[float]]:
    """(a/b, a−b in seconds) of each pair of epochs but the first (whose start holds set-up)."""
    pairs = list(zip(epochs_a, epochs_b))[1:]
    return [a / b for a, b in pairs], [a - b for a, b in pairs]
