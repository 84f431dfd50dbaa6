"""Running tools/sweep.py on the digits demo, shrunk to seconds per trial (helpers, fixtures)."""

import os
import shlex
import subprocess
import sys

import optuna
import pytest
from tool_loader import load_tool  # tests/tool_loader.py

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, 'configs', 'digits', 'lenet_digits.py')
# Two short epochs of 23 iterations; every checkpoint kept (the tests read them).
FAST = ['runner.max_epochs=2', 'data.samples_per_gpu=64', 'log_config.interval=5',
        'lr_config.warmup_iters=5', 'checkpoint_config.max_keep_ckpts=-1']
TIMEOUT = 600  # seconds: bounds a hang, not the speed (a busy 2-core machine is slow)
# One thread per trial: on a shared 2-core machine two threads that wait for each other
# make an iteration 10-30x slower than one (the sweep divides what OMP_NUM_THREADS says).
ENV = dict(os.environ, OMP_NUM_THREADS='1')


def sweep_command(work_dir, space_text, *extra, options=(), plots=False):
    """The command line of a sweep over ``space_text`` (written next to the sweep).

    Without the plots unless ``plots``: drawing them takes seconds, and one test checks them.
    """
    os.makedirs(work_dir, exist_ok=True)
    space = os.path.join(work_dir, '..', f'{os.path.basename(work_dir)}_space.py')
    with open(space, 'w') as f:
        f.write(space_text)
    return [sys.executable, os.path.join(ROOT, 'tools', 'sweep.py'), CONFIG, '--space', space,
            '--work-dir', str(work_dir), *extra, *([] if plots else ['--no-plots']),
            '--cfg-options', *FAST, *options]


def run_sweep(command, check=True):
    result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, env=ENV)
    if check:
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def run_workers(command, count=2):
    """``count`` worker processes of one sweep command, run together: their stdouts."""
    workers = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=ENV) for _ in range(count)]
    outputs = [w.communicate(timeout=TIMEOUT) for w in workers]
    assert [w.returncode for w in workers] == [0] * count, [o[1][-2000:] for o in outputs]
    return [out for out, _ in outputs]


def check_shared(outputs, trials, count):
    """Each of ``count`` trials started by exactly one worker, every worker started one,
    each COMPLETE and run once (one command line in its ``train.out``)."""
    started = [{int(line.split()[1][:-1]) for line in out.splitlines()
                if ': starting ' in line} for out in outputs]
    assert set.union(*started) == set(range(count))
    assert sum(map(len, started)) == count and all(started), started
    assert [(t.number, t.state.name) for t in trials] == [(n, 'COMPLETE') for n in range(count)]
    for t in trials:
        with open(os.path.join(t.user_attrs['work_dir'], 'train.out')) as f:
            assert f.read().count('$ ') == 1


def trial_argv(command):
    """A trial's stored command (``OMP_NUM_THREADS=k python ...``): ``(argv, env)``."""
    words = shlex.split(command)
    settings = words[:words.index(sys.executable)]
    return words[len(settings):], dict(os.environ, **dict(s.split('=', 1) for s in settings))


def load(work_dir, name='lenet_digits'):
    return optuna.load_study(study_name=name, storage=f'sqlite:///{work_dir}/sweep.db')


@pytest.fixture(scope='session')
def sweep_tool():
    """tools/sweep.py as a module (its trials fresh processes: no fork server in pytest)."""
    return load_tool('sweep')


@pytest.fixture
def sweep_dir(tmp_path):
    return str(tmp_path / 'sweep')
