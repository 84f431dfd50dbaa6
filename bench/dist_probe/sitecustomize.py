"""Imported at the start of every Python process whose PYTHONPATH holds this folder.

``bench/dist_startup.py`` puts it there: a torchrun worker (``RANK`` set) prints
the wall-clock time it reaches its first iteration and exits; any other
process (torchrun itself, a ``--check-config`` run) is left alone.
"""

import os

if 'RANK' in os.environ and os.environ.get('MTRAIN_BENCH_FIRST_ITER'):
    import time

    from mtrain.runner.base_runner import BaseRunner

    def _report_and_exit(runner, data_batch, train_mode) -> None:
        print(f"FIRST_ITER {os.environ['RANK']} {time.time()}", flush=True)
        os._exit(0)  # no after_run, no checkpoint: the start-up is all that is measured

    BaseRunner.run_iter = _report_and_exit
