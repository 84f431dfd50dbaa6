"""Wall time per iteration and data-loading time, without synchronising the device."""

import time
from typing import Dict, Tuple

from ..registry import HOOKS
from .hook import Hook


@HOOKS.register_module()
class IterTimerHook(Hook):
    """Log ``data_time`` (waiting for the loader) and ``time`` (the whole iteration).

    The times are host clock readings: on a GPU they measure when the host got
    ahead, not when kernels finished, which is what keeps the loop sync-free;
    averaged over a log interval they converge to the true step time. The
    hook keeps running sums and hands them to the log buffer when a log line
    is due (``LogBuffer.add_source``): per iteration it only reads the clock.
    """

    priority = 'LOW'

    def __init__(self) -> None:
        self._t = self._data_time = 0.
        self._sum_time = self._sum_data = 0.
        self._count = 0

    def before_run(self, runner) -> None:
        runner.log_buffer.add_source(self._take_sums)

    def before_epoch(self, runner) -> None:
        self._t = time.perf_counter()

    def before_iter(self, runner) -> None:
        self._data_time = time.perf_counter() - self._t

    def after_iter(self, runner) -> None:
        now = time.perf_counter()  # one reading ends this iteration and starts the next
        self._sum_time += now - self._t
        self._sum_data += self._data_time
        self._count += 1
        self._t = now

    def _take_sums(self) -> Dict[str, Tuple[float, int]]:
        """The sums since the last call, for the log buffer; then start again."""
        count, self._count = self._count, 0
        if not count:
            return {}
        sums = {'data_time': (self._sum_data, count), 'time': (self._sum_time, count)}
        self._sum_time = self._sum_data = 0.
        return sums
