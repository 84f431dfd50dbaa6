"""The accumulation window: which iteration ends with an update, and what each loss is divided by.

As in mmcv 1.x's ``GradientCumulativeOptimizerHook``, windows follow the
global iteration count (``[0, k)``, ``[k, 2k)``, ...), each loss is divided by
its window's length, and the run's last window, cut short by the end of the
run, divides by its own length. Both answers come from the window's start and
the run's end *as the run stands now*, asked at each iteration: a resume with
another world size or batch size moves the end of the run (an epoch has
fewer iterations), and a window is never longer than what is left of it.
"""

from typing import Optional, Tuple

from ..utils.errors import AssertedValueError


class AccumulationWindow:
    """Windows of ``length`` iterations over the global iteration count.

    Args:
        length: iterations whose gradients add up before one update
            (``cumulative_iters``); 1 steps every iteration.

    ``run_end`` in every method is one past the run's last iteration under the
    current geometry (None: not known, no window is cut short). The caller
    asks for it at each call rather than storing it, so a resume on another
    number of processes, a changed batch size or a run extended mid-way is
    followed without anything to invalidate.
    """

    def __init__(self, length: int = 1) -> None:
        if isinstance(length, bool) or not isinstance(length, int) or length <= 0:
            # an AssertionError too: mmcv 1.7.2 asserts it (1.x code may catch that class)
            raise AssertedValueError(
                f'cumulative_iters must be a positive integer, got {length!r}')
        self.length = length

    def bounds(self, iteration: int, run_end: Optional[int]) -> Tuple[int, int]:
        """``(start, end)`` of the window holding ``iteration``: ``start <= iteration < end``."""
        start = iteration - iteration % self.length
        end = start + self.length
        if run_end is not None and run_end < end:
            end = max(run_end, iteration + 1)  # (past the planned end: this iteration closes it)
        return start, end

    def ends(self, iteration: int, run_end: Optional[int]) -> bool:
        """Whether ``iteration`` (0-based) is the last of its window: an update follows."""
        return self.length == 1 or iteration + 1 == self.bounds(iteration, run_end)[1]

    def divisor(self, iteration: int, run_end: Optional[int]) -> int:
        """What ``iteration``'s loss is divided by: its window's length (>= 1)."""
        if self.length == 1:
            return 1
        start, end = self.bounds(iteration, run_end)
        return end - start
