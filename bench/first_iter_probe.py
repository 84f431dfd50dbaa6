"""``python bench/first_iter_probe.py CONFIG [train.py args]``: tools/train.py, stopped at its
first iteration, printing the wall-clock time it got there (used by ``bench/startup.py``).

The probe replaces ``BaseRunner.run_iter`` before running ``tools/train.py`` as
``__main__``; importing the runner module first changes nothing, since
train.py imports it anyway.
"""

import os
import os.path as osp
import runpy
import sys
import time

from mtrain.runner.base_runner import BaseRunner

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def _report_and_exit(runner, data_batch, train_mode) -> None:
    print(time.time(), flush=True)
    os._exit(0)  # no after_run, no checkpoint: the start-up is all that is measured


BaseRunner.run_iter = _report_and_exit
sys.argv = [osp.join(ROOT, 'tools', 'train.py')] + sys.argv[1:]
runpy.run_path(sys.argv[0], run_name='__main__')
