"""Kill a sweep mid-trial, run it again: every trial once, the interrupted one bitwise exact."""

import glob
import os
import shlex
import signal
import subprocess
import time

import pytest
import torch

from sweep_helpers import TIMEOUT, load, run_sweep, sweep_command
from sweep_helpers import sweep_dir  # noqa: F401  (a fixture)

pytestmark = pytest.mark.slow

SPACE = "space = {'optimizer.lr': loguniform(0.01, 0.3)}"
ITER_CHECKPOINTS = ['checkpoint_config.interval=4', 'checkpoint_config.by_epoch=False']


def _children(pid):
    found = []
    for path in glob.glob(f'/proc/{pid}/task/*/children'):
        with open(path) as f:
            found += [int(p) for p in f.read().split()]
    return found


def _wait_for(path, proc, deadline=TIMEOUT):
    end = time.time() + deadline
    while not os.path.exists(path):
        assert proc.poll() is None and time.time() < end, 'the sweep ended before the kill'
        time.sleep(0.05)


def _final_weights(work_dir):
    latest = os.path.realpath(os.path.join(work_dir, 'latest.pth'))
    return torch.load(latest, weights_only=True)['state_dict']


def test_sigkill_mid_trial_then_rerun_runs_each_trial_once_and_exactly(sweep_dir, tmp_path):
    command = sweep_command(sweep_dir, SPACE, '--trials', '2', '--pruner', 'none',
                            options=ITER_CHECKPOINTS)
    sweep = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for(os.path.join(sweep_dir, 'trial_0000', 'iter_12.pth'), sweep)
    trainers = _children(sweep.pid)
    for pid in trainers + [sweep.pid]:  # the trial's run first: no chance to save on the way out
        os.kill(pid, signal.SIGKILL)
    sweep.wait(timeout=TIMEOUT)
    assert len(trainers) == 1
    assert [t.state.name for t in load(sweep_dir).trials] == ['RUNNING']

    result = run_sweep(command)
    assert 'trial 0: resuming' in result.stdout and 'trial 1: starting' in result.stdout
    trials = load(sweep_dir).trials
    assert [(t.number, t.state.name) for t in trials] == [(0, 'COMPLETE'), (1, 'COMPLETE')]
    with open(os.path.join(sweep_dir, 'trial_0000', 'train.out')) as f:
        out = f.read()
    assert out.count('\n$ ') + out.startswith('$ ') == 2 and 'resumed from' in out
    with open(os.path.join(sweep_dir, 'trial_0001', 'train.out')) as f:
        assert f.read().count('$ ') == 1

    # The trial's own command, run uninterrupted elsewhere, ends with the same weights.
    argv = shlex.split(trials[0].user_attrs['command'])
    argv[argv.index('--work-dir') + 1] = str(tmp_path / 'again')
    again = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT)
    assert again.returncode == 0, again.stderr[-2000:]
    assert 'reports nothing' in again.stderr
    resumed, uninterrupted = _final_weights(trials[0].user_attrs['work_dir']), \
        _final_weights(tmp_path / 'again')
    assert resumed.keys() == uninterrupted.keys()
    assert all(torch.equal(resumed[k], uninterrupted[k]) for k in resumed)
    assert len(load(sweep_dir).trials[0].intermediate_values) == 2


def test_two_workers_on_one_study_share_the_trials(sweep_dir):
    command = sweep_command(sweep_dir, SPACE, '--trials', '4', '--pruner', 'none',
                            options=['runner.max_epochs=1'])
    workers = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True) for _ in range(2)]
    outputs = [w.communicate(timeout=TIMEOUT) for w in workers]
    assert [w.returncode for w in workers] == [0, 0], [o[1][-2000:] for o in outputs]
    started = [{int(line.split()[1][:-1]) for line in out.splitlines()
                if ': starting ' in line} for out, _ in outputs]
    assert started[0].isdisjoint(started[1]) and started[0] | started[1] == {0, 1, 2, 3}
    assert all(started)  # both worked
    trials = load(sweep_dir).trials
    assert [(t.number, t.state.name) for t in trials] == [(n, 'COMPLETE') for n in range(4)]
    for t in trials:
        with open(os.path.join(t.user_attrs['work_dir'], 'train.out')) as f:
            assert f.read().count('$ ') == 1  # run once
