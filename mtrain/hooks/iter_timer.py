"""Wall time per iteration and data-loading time, without synchronising the device."""

import time

from ..registry import HOOKS
from .hook import Hook


@HOOKS.register_module()
class IterTimerHook(Hook):
    """Log ``data_time`` (waiting for the loader) and ``time`` (the whole iteration).

    The times are host clock readings: on a GPU they measure when the host got
    ahead, not when kernels finished, which is what keeps the loop sync-free;
    averaged over a log interval they converge to the true step time.
    """

    priority = 'LOW'

    def before_epoch(self, runner) -> None:
        self._t = time.perf_counter()

    def before_iter(self, runner) -> None:
        self._data_time = time.perf_counter() - self._t

    def after_iter(self, runner) -> None:
        now = time.perf_counter()  # one reading ends this iteration and starts the next
        runner.log_buffer.update({'data_time': self._data_time, 'time': now - self._t})
        self._t = now
