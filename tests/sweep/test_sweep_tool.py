"""tools/sweep.py end to end: real Optuna on SQLite, real training runs of the digits demo."""

import csv
import os
import subprocess
import sys

import optuna
import pytest

from mtrain.sweep.study import open_study

from sweep_helpers import CONFIG, ROOT, TIMEOUT, load, run_sweep, sweep_command
from sweep_helpers import sweep_dir, sweep_tool  # noqa: F401  (fixtures)


def test_a_wrong_space_key_fails_before_any_trial(sweep_dir, sweep_tool, capsys):
    command = sweep_command(sweep_dir, "space = {'optimizer.lrr': [0.1]}")
    assert sweep_tool.main(command[2:]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"error: {sweep_dir}/../sweep_space.py, key `optimizer.lrr`: the config {CONFIG} has no "
        "key 'optimizer.lrr'. Did you mean 'optimizer.lr' or")
    assert os.listdir(sweep_dir) == []  # no study, no trial


@pytest.mark.slow
def test_an_lr_search_finds_the_good_range_and_writes_the_results(sweep_dir):
    command = sweep_command(sweep_dir, "space = {'optimizer.lr': loguniform(1e-4, 1.0)}",
                            '--trials', '4', '--jobs', '2', '--pruner', 'none')
    result = run_sweep(command)
    study = load(sweep_dir)
    assert [t.state.name for t in study.trials] == ['COMPLETE'] * 4
    best = study.best_trial
    assert 0.01 <= best.params['optimizer.lr'] <= 1.0 and best.value >= 0.9
    with open(os.path.join(sweep_dir, 'trials.csv')) as f:
        rows = list(csv.DictReader(f))
    assert [int(r['trial']) for r in rows] == [0, 1, 2, 3]
    assert float(rows[best.number]['accuracy']) == best.value
    assert f'best: trial {best.number}, accuracy {best.value:.4f}' in result.stdout
    for name in ('history', 'importances', 'parallel_coordinate', 'intermediate_values'):
        assert os.path.getsize(os.path.join(sweep_dir, 'plots', f'{name}.png')) > 1000
    # The best config is one runnable file holding the trial's lr and seed.
    best_config = os.path.join(sweep_dir, 'best_config.py')
    check = subprocess.run([sys.executable, os.path.join(ROOT, 'tools', 'train.py'), best_config,
                            '--check-config'], capture_output=True, text=True, timeout=TIMEOUT)
    assert check.returncode == 0, check.stderr
    text = open(best_config).read()
    assert f"lr={best.params['optimizer.lr']!r}" in text and 'max_epochs=2' in text


@pytest.mark.slow
def test_pruning_stops_a_deliberately_bad_trial_early(sweep_dir):
    os.makedirs(sweep_dir)
    study = optuna.create_study(storage=f'sqlite:///{sweep_dir}/sweep.db',
                                study_name='lenet_digits', direction='maximize')
    for lr in (0.1, 0.1, 1e-05):  # asked in this order: two good trials, then a hopeless one
        study.enqueue_trial({'optimizer.lr': lr}, skip_if_exists=False)
    command = sweep_command(sweep_dir, "space = {'optimizer.lr': [0.1, 1e-05]}", '--trials', '3',
                            '--pruner-args', 'n_startup_trials=2')
    run_sweep(command)
    trials = load(sweep_dir).trials
    assert [t.state.name for t in trials] == ['COMPLETE', 'COMPLETE', 'PRUNED']
    bad = trials[2]
    assert bad.user_attrs['pruned_at_step'] == 1 and list(bad.intermediate_values) == [1]
    files = os.listdir(bad.user_attrs['work_dir'])
    assert 'epoch_1.pth' in files and 'epoch_2.pth' not in files  # stopped, checkpoint kept
    assert any(name.endswith('.log.json') for name in files)
    assert 'epoch_2.pth' in os.listdir(trials[0].user_attrs['work_dir'])


@pytest.mark.slow
def test_a_metric_the_evaluation_does_not_return_stops_the_sweep_at_its_first_trial(
        sweep_dir, sweep_tool, capsys, monkeypatch):
    command = sweep_command(sweep_dir, "space = {'optimizer.lr': [0.1, 0.2]}", '--trials', '2',
                            '--metric', 'mAP', options=['runner.max_epochs=1'])
    monkeypatch.setenv('OMP_NUM_THREADS', '1')
    assert sweep_tool.main(command[2:]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('error: trial 0 failed: ')
    assert lines[0].endswith("the sweep's metric 'mAP' is not among the evaluation results "
                             "['accuracy']; pass one of them as --metric")
    trials = load(sweep_dir).trials
    assert [t.state.name for t in trials] == ['FAIL'] and 'mAP' in trials[0].user_attrs['error']


@pytest.mark.parametrize('extra, message', [
    (['--gpus-per-trial', '2'], '--gpus-per-trial 2 needs --launcher pytorch'),
    (['--sampler', 'grid'], "key `optimizer.lr`: --sampler grid needs a finite set of values, "
     'but the space gives loguniform'),
    (['--pruner-args', 'n_startup=2'], 'MedianPruner does not take these arguments'),
])
def test_other_mistakes_fail_before_any_trial(sweep_dir, sweep_tool, capsys, extra, message):
    command = sweep_command(sweep_dir, "space = {'optimizer.lr': loguniform(0.01, 0.1)}", *extra)
    assert sweep_tool.main(command[2:]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0]
    assert not os.path.exists(os.path.join(sweep_dir, 'sweep.db'))


def test_a_study_refuses_another_space(sweep_dir, sweep_tool, capsys):
    first = sweep_command(sweep_dir, "space = {'optimizer.lr': loguniform(0.01, 0.1)}")
    open_study(sweep_tool.build_spec(sweep_tool.parse_args(first[2:])))
    command = sweep_command(sweep_dir, "space = {'optimizer.lr': loguniform(0.01, 0.2)}",
                            '--trials', '0')
    assert sweep_tool.main(command[2:]) == 2
    assert ("key `space`: study 'lenet_digits' in sqlite:///" in capsys.readouterr().err)
