"""A user mistake on several ranks: one line for the whole job (``tools/train.py``, ``tools/test.py``)."""

import os
import sys
import time

import torch.distributed as dist

from .launch import report_failure

#: Seconds a rank other than 0 waits after a mistake in the config, before the process
#: group exists: rank 0 prints it and exits, and the launcher then stops this rank.
RANK_0_GRACE_S = 10


def announce_mistake(error: BaseException, launcher: str) -> None:
    """Print a user mistake in one line, once per job however many ranks meet it.

    Once the process group exists the first rank to report it prints it and
    the others stop without a word (:func:`report_failure`, which also stops
    a rank waiting in a collective for this one). Before that (the config
    file, ``--cfg-options``) there is nobody to tell: rank 0 of the launch
    prints it, since every rank read the same files, and the others wait for
    the launcher to stop them once rank 0 has exited, so it is not stopped
    before it has printed. A rank still running after that wait met a mistake
    rank 0 did not (a file missing on its node): it prints it itself.
    """
    line = f'error: {error}\n(run with --debug for the traceback)\n'
    if launcher == 'none' or dist.is_initialized():
        report_failure(error, quiet=True, announce=line)
    elif os.environ.get('RANK' if launcher == 'pytorch' else 'SLURM_PROCID') == '0':
        sys.stderr.write(line)
    else:
        time.sleep(RANK_0_GRACE_S)
        sys.stderr.write(line)
