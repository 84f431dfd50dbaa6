"""Start real 2-process gloo jobs from a test, fast: fork, no second torch import.

``launch(fn, *args)`` forks ``world_size`` processes that each set the
variables torchrun would (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``MASTER_ADDR``, ``MASTER_PORT``), join the group with mtrain's own
``init_dist('pytorch')`` and call ``fn(rank, *args)``. Forking keeps a job
to about a second (a fresh interpreter spends seconds importing torch);
``tools/dist_train.sh`` is tested with torchrun itself.

Results go through files (``torch.save`` under a ``tmp_path``); ``launch``
returns each rank's exit status and the job's wall time.
"""

import os
import os.path as osp
import socket
import sys
import time
import traceback
from typing import Any, Callable, List, Tuple

import torch
import torch.multiprocessing as mp

from mtrain.utils import destroy_dist, init_dist

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def launch(fn: Callable, *args: Any, world_size: int = 2, timeout: float = 60,
           init: bool = True) -> Tuple[List[int], float]:
    """Run ``fn(rank, *args)`` on ``world_size`` forked ranks; ``(exit codes, seconds)``.

    With ``init=False`` the ranks only get the environment and ``fn`` joins
    the group itself (e.g. through ``tools/train.py --launcher pytorch``).
    A job still running after ``timeout`` seconds is killed (codes -9).
    """
    env = dict(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(free_port()),
               WORLD_SIZE=str(world_size))
    ctx = mp.get_context('fork')
    start = time.monotonic()
    procs = [ctx.Process(target=_child, args=(fn, rank, env, init, args)) for rank in
             range(world_size)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(max(0.0, timeout - (time.monotonic() - start)))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
    return [p.exitcode for p in procs], time.monotonic() - start


def _child(fn: Callable, rank: int, env: dict, init: bool, args: tuple) -> None:
    torch.set_num_threads(1)  # 2 ranks on 2 cores; also keeps OpenMP out of a forked child
    os.environ.update(env, RANK=str(rank), LOCAL_RANK=str(rank))
    try:
        if init:
            init_dist('pytorch', backend='gloo')
        fn(rank, *args)
        if init:
            destroy_dist()
    except BaseException:  # noqa: BLE001 - report like a crashed worker would
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip the parent's (pytest's) exit handlers inherited by fork
