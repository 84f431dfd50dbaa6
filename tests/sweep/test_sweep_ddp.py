"""A trial that is itself a 2-process DDP run (gloo): rank 0 reports, all ranks stop.

Under torchrun, and under Slurm's ``srun`` as far as one machine without Slurm allows:
a stand-in ``srun`` (``srun_standin.py``) starts the tasks with the ``SLURM_*`` variables
srun sets, and each task is a real ``tools/train.py --launcher slurm`` process.
"""

import json
import os
import sys

import optuna
import pytest

from sweep_helpers import load, sweep_command
from sweep_helpers import sweep_dir, sweep_tool  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slow


def _run_pruned_trial(sweep_dir, sweep_tool, monkeypatch, *launcher):
    """A sweep whose second trial runs under ``launcher`` and is pruned after epoch 1."""
    os.makedirs(sweep_dir)
    study = optuna.create_study(storage=f'sqlite:///{sweep_dir}/sweep.db',
                                study_name='lenet_digits', direction='maximize')
    bar = study.ask()  # a finished trial that scored 0.999 at every step: the median to beat
    for step in (1, 2):
        bar.report(0.999, step)
    study.tell(bar, 0.999)
    command = sweep_command(sweep_dir, "space = {'optimizer.lr': [0.1]}", '--trials', '2',
                            *launcher, '--gpus-per-trial', '2',
                            '--pruner-args', 'n_startup_trials=1')
    monkeypatch.setenv('OMP_NUM_THREADS', '1')
    assert sweep_tool.main(command[2:]) == 0
    trial = load(sweep_dir).trials[1]
    assert trial.state.name == 'PRUNED' and trial.user_attrs['pruned_at_step'] == 1
    assert list(trial.intermediate_values) == [1]
    with open(os.path.join(trial.user_attrs['work_dir'], 'train.out')) as f:
        out = f.read()
    assert 'is already reported' not in out  # Optuna's warning for a second report of a step
    assert out.count('pruned at step 1') == 1
    files = os.listdir(trial.user_attrs['work_dir'])
    assert 'epoch_1.pth' in files and 'epoch_2.pth' not in files  # both ranks stopped there
    log_json = next(name for name in files if name.endswith('.log.json'))
    with open(os.path.join(trial.user_attrs['work_dir'], log_json)) as f:
        assert 'world size 2' in json.loads(f.readline())['env_info']  # one group of 2
    assert '[1][10/12]' in out  # 1433 images in batches of 64 on each of 2 ranks
    return trial, out


def test_a_two_process_trial_reports_once_and_both_ranks_stop_when_pruned(sweep_dir, sweep_tool,
                                                                         monkeypatch):
    _, out = _run_pruned_trial(sweep_dir, sweep_tool, monkeypatch, '--launcher', 'pytorch')
    assert 'torch.distributed.run' in out and '--launcher pytorch' in out


def test_a_slurm_trial_is_one_task_per_process_and_reports_once(sweep_dir, sweep_tool,
                                                                monkeypatch, tmp_path):
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    srun = bin_dir / 'srun'
    standin = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'srun_standin.py')
    srun.write_text(f'#!/bin/sh\nexec {sys.executable} {standin} "$@"\n')
    srun.chmod(0o755)
    monkeypatch.setenv('PATH', f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    trial, out = _run_pruned_trial(sweep_dir, sweep_tool, monkeypatch, '--launcher', 'slurm',
                                   '--partition', 'cpu', '--gpus-per-node', '0',
                                   '--cpus-per-task', '1')
    assert '$ srun -p cpu --job-name=lenet_digits_trial_1 --ntasks=2 --ntasks-per-node=2' in out
    assert '--launcher slurm' in out
    # Each task took its rank and the world size from SLURM_PROCID / SLURM_NTASKS (the
    # group of 2 checked above): only rank 0 logs, and the command says its master port.
    assert out.count('Start running') == 1
    assert trial.user_attrs['command'].startswith('OMP_NUM_THREADS=1 MASTER_PORT=')
