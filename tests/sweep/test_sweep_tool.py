"""tools/sweep.py end to end: real Optuna on SQLite, real training runs of the digits demo."""

import csv
import os
import shutil

import pytest

from mtrain.sweep.study import open_study

from sweep_helpers import CONFIG, check_shared, load, run_workers, sweep_command
from tool_loader import load_tool
from sweep_helpers import sweep_dir, sweep_tool  # noqa: F401  (fixtures)


def test_a_wrong_space_key_fails_before_any_trial(sweep_dir, sweep_tool, capsys):
    command = sweep_command(sweep_dir, "space = {'optimizer.lrr': [0.1]}")
    assert sweep_tool.main(command[2:]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"error: {sweep_dir}/../sweep_space.py, key `optimizer.lrr`: the config {CONFIG} has no "
        "key 'optimizer.lrr'. Did you mean 'optimizer.lr' or")
    assert os.listdir(sweep_dir) == []  # no study, no trial


def test_a_failing_import_in_the_space_is_one_error_line(sweep_dir, sweep_tool, capsys):
    """Issue 33 item 10, as the user sees it: one line naming the file, no traceback."""
    command = sweep_command(sweep_dir, "from mtrain.sweep import loguniformm\n"
                            "space = {'optimizer.lr': loguniformm(1e-3, 1.0)}")
    assert sweep_tool.main(command[2:]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f'error: {sweep_dir}/../sweep_space.py: '
                                                   "line 1: cannot import name 'loguniformm'")


SEARCH = "space = {'optimizer.lr': loguniform(1e-3, 1.0)}"  # >= 0.9 after 2 epochs: ~[0.035, 0.3]


@pytest.fixture(scope='module')
def search(tmp_path_factory):
    """Two worker processes run one lr search of 4 trials on one study (shared by 2 tests)."""
    sweep_dir = str(tmp_path_factory.mktemp('search') / 'sweep')
    command = sweep_command(sweep_dir, SEARCH, '--trials', '4', '--pruner', 'none')
    return sweep_dir, command, run_workers(command)


@pytest.mark.slow
def test_two_workers_on_one_study_share_the_trials(search):
    sweep_dir, _, outputs = search
    trials = load(sweep_dir).trials
    check_shared(outputs, trials, 4)
    # The sampler is seeded per trial, not per worker: no two workers draw the same values.
    assert len({t.params['optimizer.lr'] for t in trials}) == 4


@pytest.mark.slow
@pytest.mark.filterwarnings('ignore:Unable to enable fault handler')  # train.py's @record, here
def test_an_lr_search_finds_the_good_range_and_writes_the_results(search, sweep_tool, capsys):
    sweep_dir, command, _ = search
    # The same command with the plots: the study has its 4 trials, so it only reports.
    assert sweep_tool.main([word for word in command[2:] if word != '--no-plots']) == 0
    out = capsys.readouterr().out
    study = load(sweep_dir)
    assert [t.state.name for t in study.trials] == ['COMPLETE'] * 4
    assert all(list(t.intermediate_values) == [1, 2] for t in study.trials)  # one per epoch
    best = study.best_trial
    assert 0.01 <= best.params['optimizer.lr'] <= 1.0 and best.value >= 0.9
    with open(os.path.join(sweep_dir, 'trials.csv')) as f:
        rows = list(csv.DictReader(f))
    assert [int(r['trial']) for r in rows] == [0, 1, 2, 3]
    assert float(rows[best.number]['accuracy']) == best.value
    assert f'best: trial {best.number}, accuracy {best.value:.4f}' in out
    for name in ('history', 'importances', 'parallel_coordinate', 'intermediate_values'):
        assert os.path.getsize(os.path.join(sweep_dir, 'plots', f'{name}.png')) > 1000
    assert not [name for name in os.listdir(sweep_dir) if '.tmp' in name]
    # The best config is one runnable file holding the trial's lr and seed.
    best_config = os.path.join(sweep_dir, 'best_config.py')
    assert load_tool('train').main([best_config, '--check-config']) == 0
    assert 'config check passed' in capsys.readouterr().out
    text = open(best_config).read()
    assert f"lr={best.params['optimizer.lr']!r}" in text and 'max_epochs=2' in text


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
    pytest.param(['--launcher', 'slurm', '--gpus-per-trial', '2'],
                 '--launcher slurm runs each trial with srun, which is not on PATH',
                 marks=pytest.mark.skipif(shutil.which('srun') is not None,
                                          reason='srun is installed here')),
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
