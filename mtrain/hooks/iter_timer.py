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
        self._clock = _Sums()

    def before_run(self, runner) -> None:
        runner.log_buffer.add_source(self._take_sums)

    def before_epoch(self, runner) -> None:
        self._clock.last = time.perf_counter()

    def before_iter(self, runner) -> None:
        clock = self._clock
        clock.data = time.perf_counter() - clock.last

    def after_iter(self, runner) -> None:
        clock = self._clock
        now = time.perf_counter()  # one reading ends this iteration and starts the next
        clock.sum_time += now - clock.last
        clock.sum_data += clock.data
        clock.count += 1
        clock.last = now

    def _take_sums(self) -> Dict[str, Tuple[float, int]]:
        """The sums since the last call, for the log buffer; then start again."""
        clock = self._clock
        count, clock.count = clock.count, 0
        if not count:
            return {}
        sums = {'data_time': (clock.sum_data, count), 'time': (clock.sum_time, count)}
        clock.sum_time = clock.sum_data = 0.
        return sums


class _Sums:
    """The timer's readings and running sums.

    An object of their own: written five times an iteration, they would
    otherwise each go through ``Hook.__setattr__`` (which watches for stage
    methods assigned on a hook).
    """

    __slots__ = ('last', 'data', 'sum_time', 'sum_data', 'count')

    def __init__(self) -> None:
        self.last = self.data = self.sum_time = self.sum_data = 0.
        self.count = 0
