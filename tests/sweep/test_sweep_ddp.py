"""A trial that is itself a 2-process DDP run (torchrun, gloo): rank 0 reports, all ranks stop."""

import os

import optuna
import pytest

from sweep_helpers import load, sweep_command
from sweep_helpers import sweep_dir, sweep_tool  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slow


def test_a_two_process_trial_reports_once_and_both_ranks_stop_when_pruned(sweep_dir, sweep_tool,
                                                                         monkeypatch):
    os.makedirs(sweep_dir)
    study = optuna.create_study(storage=f'sqlite:///{sweep_dir}/sweep.db',
                                study_name='lenet_digits', direction='maximize')
    bar = study.ask()  # a finished trial that scored 0.999 at every step: the median to beat
    for step in (1, 2):
        bar.report(0.999, step)
    study.tell(bar, 0.999)
    command = sweep_command(sweep_dir, "space = {'optimizer.lr': [0.1]}", '--trials', '2',
                            '--launcher', 'pytorch', '--gpus-per-trial', '2',
                            '--pruner-args', 'n_startup_trials=1')
    monkeypatch.setenv('OMP_NUM_THREADS', '1')
    assert sweep_tool.main(command[2:]) == 0
    trial = load(sweep_dir).trials[1]
    assert trial.state.name == 'PRUNED' and trial.user_attrs['pruned_at_step'] == 1
    assert list(trial.intermediate_values) == [1]
    with open(os.path.join(trial.user_attrs['work_dir'], 'train.out')) as f:
        out = f.read()
    assert 'torch.distributed.run' in out and '--launcher pytorch' in out
    assert 'is already reported' not in out  # Optuna's warning for a second report of a step
    assert out.count('pruned at step 1') == 1
    files = os.listdir(trial.user_attrs['work_dir'])
    assert 'epoch_1.pth' in files and 'epoch_2.pth' not in files  # both ranks stopped there
