"""OptunaPruningHook on a real SQLite study and a real (toy) training run."""

import optuna
import pytest

from conftest import ToyDataset
from mtrain.datasets import build_dataloader
from mtrain.hooks import EvalHook, OptimizerHook, OptunaPruningHook
from mtrain.utils import ConfigError


class Scripted(ToyDataset):
    """The toy data scored with a scripted accuracy: the next value per evaluation."""

    def __init__(self, values):
        super().__init__(n=16)
        self.values = list(values)

    def evaluate(self, results, logger=None, **kwargs):
        return {'accuracy': self.values.pop(0)}


@pytest.fixture
def study(tmp_path):
    """A study whose trial 0 scored 0.5, 0.6, ... 0.9 (the bar the median pruner sets)."""
    storage = f'sqlite:///{tmp_path}/s.db'
    study = optuna.create_study(storage=storage, study_name='s', direction='maximize')
    first = study.ask()
    for step in range(1, 6):
        first.report(0.4 + 0.1 * step, step)
    study.tell(first, 0.9)
    return study, storage


def _run(make_runner, hook, accuracies, max_len=5):
    runner = make_runner(max_len=max_len)
    runner.register_hook(OptimizerHook())
    runner.register_hook(EvalHook(build_dataloader(Scripted(accuracies), 8, 0, shuffle=False)))
    runner.register_hook(hook)
    runner.run([build_dataloader(ToyDataset(n=16), 8, 0, shuffle=False)], [('train', 1)])
    return runner


def _hook(storage, number, **kwargs):
    return OptunaPruningHook(storage=storage, study_name='s', trial_number=number,
                             pruner='median', pruner_args=dict(n_startup_trials=1), **kwargs)


def test_reports_each_evaluation_and_stops_a_hopeless_trial(make_runner, study):
    study, storage = study
    trial = study.ask()
    hook = _hook(storage, trial.number)
    runner = _run(make_runner, hook, [0.55, 0.65, 0.66, 0.9, 0.9])
    # Its best so far beats trial 0 at epochs 1 and 2, not at 3: it stops there, cleanly.
    assert runner.epoch == 3
    frozen = study.trials[trial.number]
    assert frozen.intermediate_values == {1: 0.55, 2: 0.65, 3: 0.66}
    assert frozen.user_attrs['pruned_at_step'] == 3
    assert hook.state_dict() == {'pruned_at': 3}
    # A run resumed from the checkpoint of that epoch stops at once.
    resumed = _hook(storage, trial.number)
    resumed.load_state_dict(hook.state_dict())
    runner = make_runner(max_len=5)
    resumed.before_run(runner)
    assert runner.should_stop


def test_replaying_a_finished_trial_reports_nothing_and_stops_where_it_was_pruned(make_runner,
                                                                                   study):
    study, storage = study
    trial = study.ask()
    _run(make_runner, _hook(storage, trial.number), [0.55, 0.1, 0.9, 0.9, 0.9])
    study.tell(trial.number, state=optuna.trial.TrialState.PRUNED)
    runner = _run(make_runner, _hook(storage, trial.number), [0.9] * 5)
    assert runner.epoch == 2  # where the trial was pruned, whatever it scores now
    assert study.trials[trial.number].intermediate_values == {1: 0.55, 2: 0.1}


def test_a_metric_the_evaluation_does_not_return_is_a_config_error(make_runner, study):
    study, storage = study
    hook = _hook(storage, study.ask().number, monitor='mAP')
    with pytest.raises(ConfigError, match=r"metric 'mAP' is not among the evaluation results "
                       r"\['accuracy'\]; pass one of them as --metric"):
        _run(make_runner, hook, [0.9] * 5)


def test_unknown_pruner_and_bad_pruner_arguments_are_config_errors(study):
    _, storage = study
    with pytest.raises(ConfigError, match="unknown pruner 'meadian'"):
        OptunaPruningHook(storage, 's', 0, pruner='meadian')
    with pytest.raises(ConfigError, match='MedianPruner does not take these arguments'):
        OptunaPruningHook(storage, 's', 0, pruner_args=dict(n_startup=2))
