"""Where the run ends, asked when needed: the accumulation window and mmcv's ``_init`` read it."""

from typing import Optional


def run_end(runner) -> Optional[int]:
    """One past the run's last training iteration, from where the run is now.

    An iteration-based run ends at ``max_iters``. An epoch-based one ends
    ``max_epochs - epoch`` loader lengths after the current epoch's first
    iteration, counted with the loader as it is now: a run resumed on another
    number of processes (or batch size) has a different number of iterations
    per epoch than its checkpoint's iteration count implies, and a stored
    ``max_iters`` would put the end of the run in the wrong place.
    """
    if runner.max_epochs is None:
        return runner.max_iters
    try:
        per_epoch = len(runner.data_loader)
    except TypeError:  # (a loader without a length: the runner's own count)
        return runner.max_iters
    return runner.iter - runner.inner_iter + (runner.max_epochs - runner.epoch) * per_epoch
