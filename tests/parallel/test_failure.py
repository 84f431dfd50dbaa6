"""When one rank fails, the whole job ends soon, showing that rank's error."""

import os
import time

import pytest
import torch.distributed as dist

from dist_launch import ROOT, launch
from tool_loader import load_tool
from mtrain.datasets import DigitsDataset
from mtrain.hooks import Hook
from mtrain.registry import HOOKS
from mtrain.utils import report_failure

pytestmark = pytest.mark.slow


def _report_then_linger(rank):
    if rank == 1:
        error = RuntimeError('disk full on rank 1')
        report_failure(error)
        time.sleep(3)  # still connected: rank 0 cannot learn of the failure from gloo
        raise error
    dist.barrier()  # rank 1 never joins: without the watch this waits 30 minutes


def test_a_reported_failure_stops_a_rank_blocked_in_a_collective(capfd):
    codes, seconds = launch(_report_then_linger, timeout=30)
    err = capfd.readouterr().err
    assert codes == [1, 1] and seconds < 10
    assert 'rank 0: stopping because rank 1 failed: RuntimeError: disk full on rank 1' in err


def _store_host_fails(rank):
    if rank == 0:  # hosts the job's store (as under Slurm): the report must not die with it
        raise_and_report(RuntimeError('rank 0 is out of memory'))
    dist.barrier()


def raise_and_report(error):
    report_failure(error)
    raise error


def test_the_store_host_failing_still_stops_the_others(capfd):
    codes, seconds = launch(_store_host_fails, timeout=30)
    assert codes == [1, 1] and seconds < 10
    assert 'rank 1: stopping because rank 0 failed: RuntimeError: rank 0 is out of memory' \
        in capfd.readouterr().err


def test_a_rank_that_finishes_first_does_not_stop_the_others(capfd):
    codes, _ = launch(_finish_at_different_times)
    assert codes == [0, 0] and 'stopping because' not in capfd.readouterr().err


def _finish_at_different_times(rank):
    if rank == 1:
        time.sleep(2)  # rank 0 (the store's host) has left the group by now


@HOOKS.register_module(force=True)
class RaiseOnRankHook(Hook):
    """Raise on one rank after a given iteration (test only)."""

    def __init__(self, rank: int, iteration: int) -> None:
        self.rank, self.iteration = rank, iteration

    def after_train_iter(self, runner) -> None:
        if runner.rank == self.rank and runner.iter + 1 == self.iteration:
            raise RuntimeError(f'rank {self.rank} fails at iteration {self.iteration} on purpose')


def _train_tool_job(rank, argv):
    os._exit(load_tool('train').main(argv))


def test_train_tool_rank_raising_at_step_3_ends_the_job_with_its_error(tmp_path, capfd):
    DigitsDataset('val')  # scikit-learn's import, here once rather than in each forked rank
    config = tmp_path / 'fails.py'
    config.write_text(
        f"_base_ = ['{ROOT}/configs/digits/lenet_digits.py']\n"
        "custom_hooks = [dict(type='RaiseOnRankHook', rank=1, iteration=3)]\n"
        "runner = dict(max_epochs=1)\n")
    argv = [str(config), '--work-dir', str(tmp_path / 'work'), '--launcher', 'pytorch']
    codes, seconds = launch(_train_tool_job, argv, init=False, timeout=60)
    err = capfd.readouterr().err
    assert codes[1] == 1 and codes[0] != 0 and seconds < 60
    assert 'RuntimeError: rank 1 fails at iteration 3 on purpose' in err
    # Rank 0 stopped either by the watch or by its own error, which then names rank 1's first.
    assert ('rank 0: stopping because rank 1 failed: RuntimeError: rank 1 fails' in err
            or 'rank 0: rank 1 failed: RuntimeError: rank 1 fails at iteration 3 on purpose '
            "(before this rank's error below)" in err)
