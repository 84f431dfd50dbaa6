"""Stop on SIGTERM/SIGINT after an iteration that every rank agrees on.

One process stops after the iteration the signal came in. Under DDP the
ranks may get the signal at different iterations (a launcher forwarding it,
a node-local signal); each only notes it, and every ``check_interval``
iterations one all-reduce (the max of the signal numbers) tells all ranks
whether any was signalled, so they stop after the same iteration and rank 0
writes one checkpoint. No collective runs in the iterations between
(docs/robustness.md has the measurement).
"""

import signal
from typing import Any, Callable, Dict, Optional

from ..utils.dist import max_over_ranks


class StopSignals:
    """The run's signal handlers: installed by ``install``, put back by ``restore``.

    Args:
        world_size: processes in the run (1: no agreement needed).
        check_interval: iterations between agreements under DDP.
    """

    def __init__(self, world_size: int, check_interval: int = 10) -> None:
        if not isinstance(check_interval, int) or check_interval <= 0:
            raise ValueError(f'check_interval must be a positive integer, got {check_interval!r}')
        self.world_size = world_size
        self.check_interval = check_interval
        self.received: Optional[int] = None  # this rank's signal, not yet agreed on
        self._saved: Dict[int, Any] = {}  # signal → the handler before ours

    def install(self, signals, on_first: Callable[[int], None]) -> None:
        """Note the first signal (``on_first(signum)``); a second one interrupts at once."""
        def handler(signum, frame):
            if self.received is not None:
                raise KeyboardInterrupt(f'second {signal.Signals(signum).name}: stopping now')
            self.received = signum
            on_first(signum)

        for signum in signals:
            self._saved.setdefault(signum, signal.signal(signum, handler))

    def restore(self) -> None:
        """Put back the handlers that were there before (a later run stays interruptible)."""
        for signum, previous in self._saved.items():
            signal.signal(signum, previous)
        self._saved.clear()

    def agreed(self, done_iters: int, at_end: bool = False) -> Optional[str]:
        """The signal to stop for after ``done_iters`` iterations, if any rank got one."""
        if self.world_size == 1 or not self._saved:
            signum = self.received
        elif at_end or done_iters % self.check_interval == 0:
            signum = max_over_ranks(self.received or 0) or None  # every rank calls it here
        else:
            return None
        return None if signum is None else signal.Signals(signum).name

    def describe_wait(self) -> str:
        if self.world_size == 1:
            return 'after this iteration'
        return (f'at the next iteration all {self.world_size} ranks agree on (at most '
                f'{self.check_interval})')
