"""Kill a real training process (SIGKILL / SIGTERM), auto-resume, and get the same weights."""

import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch

pytestmark = pytest.mark.slow

# Deadlines bound a hang, not the speed: one run takes ~5 s on a quiet 2-core machine, but
# more than 120 s has been seen with several test suites sharing those cores.
TIMEOUT = 600  # seconds for a whole training subprocess
CHECKPOINT_WAIT = 300  # seconds for the first checkpoint to appear

OPTIONS = ['runner.max_epochs=2', 'checkpoint_config.interval=4', 'checkpoint_config.by_epoch=False',
           'checkpoint_config.max_keep_ckpts=-1', 'log_config.interval=5', 'evaluation.interval=1']


def _cmd(repo_root, work_dir, *extra):
    return [sys.executable, os.path.join(repo_root, 'tools', 'train.py'),
            os.path.join(repo_root, 'configs', 'digits', 'lenet_digits.py'), '--work-dir',
            str(work_dir), '--seed', '0', '--cfg-options', *OPTIONS, *extra]


def _final_weights(work_dir):
    ckpt = torch.load(os.path.join(work_dir, 'iter_90.pth'), weights_only=True)
    return ckpt['state_dict']


@pytest.fixture(scope='module')
def reference_run(repo_root, tmp_path_factory):
    """The uninterrupted run's work dir."""
    work_dir = tmp_path_factory.mktemp('reference')
    subprocess.run(_cmd(repo_root, work_dir), check=True, capture_output=True, timeout=TIMEOUT)
    return work_dir


@pytest.fixture(scope='module')
def reference(reference_run):
    """The uninterrupted run's final weights."""
    return _final_weights(reference_run)


def _wait_for_checkpoint(work_dir, proc, at_least):
    deadline = time.time() + CHECKPOINT_WAIT
    while time.time() < deadline and proc.poll() is None:
        done = [int(n[5:-4]) for n in os.listdir(work_dir) if n.startswith('iter_')
                and n.endswith('.pth')]
        if done and max(done) >= at_least:
            return
        time.sleep(0.01)
    raise AssertionError('no checkpoint appeared in time')


def _assert_same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


ASYNC = ['checkpoint_config.async_save=True']  # checkpoints written by a background thread


# Two kills through tools/train.py itself (synchronous and background writes); the many kill
# moments are tests/runner/test_kill_anywhere.py's matrix.
@pytest.mark.parametrize('seed,extra', [(0, []), (3, ASYNC)])
def test_sigkill_at_a_random_moment_then_auto_resume(repo_root, tmp_path, reference, seed, extra):
    rng = random.Random(seed)
    proc = subprocess.Popen(_cmd(repo_root, tmp_path, *extra), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _wait_for_checkpoint(tmp_path, proc, rng.choice([4, 20, 44, 60]))
    time.sleep(rng.uniform(0, 0.3))
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=TIMEOUT)
    if proc.returncode == 0:
        pytest.skip('the run finished before the kill')
    resumed = subprocess.run(_cmd(repo_root, tmp_path, *extra, '--auto-resume'),
                             capture_output=True, text=True, timeout=TIMEOUT)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert 'resumed from' in resumed.stderr
    _assert_same(_final_weights(tmp_path), reference)


@pytest.mark.parametrize('extra', [[], ASYNC])
def test_sigterm_saves_says_how_to_resume_and_resumes_exactly(repo_root, tmp_path, reference,
                                                              extra):
    proc = subprocess.Popen(_cmd(repo_root, tmp_path, *extra), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    _wait_for_checkpoint(tmp_path, proc, 8)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    hint = err.split('Resume this run with:\n', 1)[1].splitlines()[0]
    command = shlex.split(hint)  # pasted as printed: this work dir, these options
    assert command[0] in ('python', sys.executable) and '--auto-resume' in command
    assert command[command.index('--work-dir') + 1] == str(tmp_path)
    assert all(option in command for option in OPTIONS + extra)
    resumed = subprocess.run([sys.executable, *command[1:]],
                             capture_output=True, text=True, timeout=TIMEOUT)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    _assert_same(_final_weights(tmp_path), reference)


def test_truncated_newest_checkpoint_falls_back_to_the_previous(repo_root, tmp_path, reference_run,
                                                               reference):
    tmp_path = tmp_path / 'work'  # the uninterrupted run's files (the same command's)
    shutil.copytree(reference_run, tmp_path, symlinks=True)
    newest = os.path.join(tmp_path, 'iter_90.pth')
    with open(newest, 'r+b') as f:
        f.truncate(1000)
    resumed = subprocess.run(_cmd(repo_root, tmp_path, '--auto-resume'), capture_output=True,
                             text=True, timeout=TIMEOUT)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert 'iter_90.pth is truncated or corrupt' in resumed.stderr
    assert 'resumed from' in resumed.stderr and 'iter_88.pth' in resumed.stderr
    _assert_same(_final_weights(tmp_path), reference)
