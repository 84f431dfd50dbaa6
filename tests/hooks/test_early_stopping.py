import pytest

from mtrain.hooks import EarlyStoppingHook, Hook, OptimizerHook
from mtrain.utils import ConfigError


class FakeMetric(Hook):
    """Publishes a scripted metric per epoch, the way EvalHook publishes real ones."""

    priority = 'LOW'

    def __init__(self, values):
        self.values = values

    def after_train_epoch(self, runner):
        runner.eval_results = {'accuracy': self.values[runner.epoch]}
        runner.call_hook('after_evaluation')


def test_stops_after_patience_evaluations_without_improvement(make_runner, toy_loader):
    runner = make_runner(max_len=10)
    runner.register_hook(OptimizerHook())
    runner.register_hook(FakeMetric([0.5, 0.6, 0.6, 0.61, 0.59, 0.6, 0.7, 0.8, 0.9, 1.0]))
    hook = EarlyStoppingHook(monitor='accuracy', patience=2, min_delta=0.02)
    runner.register_hook(hook)
    runner.run([toy_loader], [('train', 1)])
    # 0.6 improves on 0.5; 0.6 and 0.61 are within min_delta: stop after epoch 4.
    assert runner.epoch == 4 and hook.best == 0.6
    assert hook.state_dict() == {'best': 0.6, 'wait': 2}


def test_rule_defaults_and_validation():
    assert EarlyStoppingHook(monitor='val_loss').rule == 'less'
    # Issue 33, one rule for a metric: as the evaluation's save_best (mmengine's hook too).
    assert EarlyStoppingHook(monitor='mAP').rule == 'greater'
    assert EarlyStoppingHook(monitor='mae', rule='less').rule == 'less'
    with pytest.raises(ConfigError, match="smaller 'mae' is better; set rule="):
        EarlyStoppingHook(monitor='mae')
    with pytest.raises(ValueError, match='patience'):
        EarlyStoppingHook(patience=0)
