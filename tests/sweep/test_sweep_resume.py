"""Kill a sweep mid-trial, run it again: every trial once, the interrupted one bitwise exact."""

import glob
import os
import signal
import subprocess
import time

import pytest
import torch

from sweep_helpers import ENV, TIMEOUT, load, run_sweep, sweep_command, trial_argv
from sweep_helpers import sweep_dir  # noqa: F401  (a fixture)

pytestmark = pytest.mark.slow

SPACE = "space = {'optimizer.lr': loguniform(1e-3, 0.3)}"
BAD_LR = 1e-3  # learns next to nothing in one epoch
ITER_CHECKPOINTS = ['checkpoint_config.interval=4', 'checkpoint_config.by_epoch=False']


def _wait_for(path, proc, deadline=TIMEOUT):
    end = time.time() + deadline
    while not os.path.exists(path):
        assert proc.poll() is None and time.time() < end, 'the sweep ended before the kill'
        time.sleep(0.05)


def _output(sweep_dir, number):
    with open(os.path.join(sweep_dir, f'trial_{number:04d}', 'train.out')) as f:
        return f.read()


def _trial_runs(sweep_dir):
    """Processes whose command line names this sweep's folder (its training runs)."""
    found = []
    for path in glob.glob('/proc/[0-9]*/cmdline'):
        try:
            with open(path, 'rb') as f:
                if sweep_dir.encode() in f.read():
                    found.append(int(path.split('/')[2]))
        except OSError:
            pass
    return found


def _wait_for_exit(pids, deadline=TIMEOUT):
    end = time.time() + deadline
    while any(os.path.exists(f'/proc/{pid}') for pid in pids):
        assert time.time() < end, 'a training run outlived its sweep'
        time.sleep(0.05)


def _final_weights(work_dir):
    latest = os.path.realpath(os.path.join(work_dir, 'latest.pth'))
    return torch.load(latest, weights_only=True)['state_dict']


@pytest.fixture(scope='module')
def restarted(tmp_path_factory):
    """A sweep of 2 trials SIGKILLed during trial 0, then run again to its end.

    Before the restart a hopeless trial (lr 1e-3) is queued: it becomes trial 1, measured
    against trial 0 by the median pruner (``n_startup_trials=1``).
    """
    sweep_dir = str(tmp_path_factory.mktemp('restarted') / 'sweep')
    command = sweep_command(sweep_dir, SPACE, '--trials', '2', '--pruner-args',
                            'n_startup_trials=1', options=ITER_CHECKPOINTS)
    sweep = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=ENV)
    _wait_for(os.path.join(sweep_dir, 'trial_0000', 'iter_12.pth'), sweep)
    runs = [pid for pid in _trial_runs(sweep_dir) if pid != sweep.pid]
    sweep.send_signal(signal.SIGKILL)
    sweep.wait(timeout=TIMEOUT)
    _wait_for_exit(runs)  # the runs do not outlive their sweep
    killed = {'states': [t.state.name for t in load(sweep_dir).trials],
              'out': _output(sweep_dir, 0)}
    load(sweep_dir).enqueue_trial({'optimizer.lr': BAD_LR})
    return sweep_dir, killed, run_sweep(command)


def test_sigkill_mid_trial_then_rerun_runs_each_trial_once_and_exactly(restarted, tmp_path):
    """The sweep is killed; its training run gets one SIGTERM, saves a checkpoint, exits."""
    sweep_dir, killed, result = restarted
    assert killed['states'] == ['RUNNING']
    assert 'SIGTERM received' in killed['out'] and 'second SIGTERM' not in killed['out']
    assert 'checkpoint saved to' in killed['out']

    assert 'trial 0: resuming' in result.stdout
    study = load(sweep_dir)
    assert [(t.number, t.state.name) for t in study.trials] == [(0, 'COMPLETE'), (1, 'PRUNED')]
    out = _output(sweep_dir, 0)
    assert out.count('\n$ ') + out.startswith('$ ') == 2 and 'resumed from' in out
    assert _output(sweep_dir, 1).count('$ ') == 1

    # The trial's own command, run uninterrupted elsewhere (a fresh process, where the
    # sweep forked), ends with the same weights.
    first = study.trials[0]
    argv, env = trial_argv(first.user_attrs['command'])
    assert env['OMP_NUM_THREADS'] == '1'
    argv[argv.index('--work-dir') + 1] = str(tmp_path / 'again')
    again = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert 'reports nothing' in again.stderr
    resumed = _final_weights(first.user_attrs['work_dir'])
    uninterrupted = _final_weights(tmp_path / 'again')
    assert resumed.keys() == uninterrupted.keys()
    assert all(torch.equal(resumed[k], uninterrupted[k]) for k in resumed)
    assert len(load(sweep_dir).trials[0].intermediate_values) == 2


def test_pruning_stops_a_deliberately_bad_trial_early(restarted):
    sweep_dir, _, result = restarted
    bad = load(sweep_dir).trials[1]
    assert bad.params == {'optimizer.lr': BAD_LR} and bad.state.name == 'PRUNED'
    assert bad.user_attrs['pruned_at_step'] == 1 and list(bad.intermediate_values) == [1]
    assert 'trial 1: pruned at step 1' in result.stdout
    # Stopped after its first epoch (23 iterations; checkpoints every 4), its checkpoints kept.
    files = os.listdir(bad.user_attrs['work_dir'])
    assert sorted(int(name[5:-4]) for name in files if name.startswith('iter_')) == [
        4, 8, 12, 16, 20]
    assert any(name.endswith('.log.json') for name in files)
