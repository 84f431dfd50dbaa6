"""mmcv 1.7.2's logger-hook helpers, as a user-written 1.x logger hook's ``log()`` calls them."""

import numpy as np
import pytest
import torch

from mtrain.hooks import IterTimerHook, OptimizerHook
from mtrain.hooks.logger.base import LoggerHook


class RecordingLoggerHook(LoggerHook):
    """Written as 1.x codebases wrote their tracker hooks (mmcv's TensorboardLoggerHook shape)."""

    def __init__(self, interval=10, ignore_last=True, reset_flag=False, by_epoch=True):
        super().__init__(interval, ignore_last, reset_flag, by_epoch)
        self.lines = []

    def log(self, runner):
        tags = self.get_loggable_tags(runner, allow_text=True)
        scalars = {k: v for k, v in tags.items() if self.is_scalar(v)}
        self.lines.append((self.get_iter(runner), scalars))


def test_a_1x_logger_hook_gets_mmcvs_tags(make_runner, toy_loader):
    runner = make_runner(by_epoch=False, max_len=4, lr=0.1, momentum=0.9)
    runner.register_hook(OptimizerHook())
    runner.register_hook(IterTimerHook())  # (mmcv's get_mode: a train line has a time)
    hook = RecordingLoggerHook(interval=2, by_epoch=False)
    runner.register_hook(hook)
    runner.run([toy_loader], [('train', 1)])
    assert [step for step, _ in hook.lines] == [2, 4]
    tags = hook.lines[-1][1]
    assert {'train/loss', 'train/loss_cls', 'train/acc', 'learning_rate', 'momentum'} <= set(tags)
    assert 'train/time' not in tags and 'train/data_time' not in tags
    assert tags['learning_rate'] == 0.1 and tags['momentum'] == 0.9


def test_get_loggable_tags_filters_as_mmcv(make_runner):
    runner = make_runner(lr=0.2)
    runner.mode = 'val'
    runner.log_buffer.output.update(acc=0.5, note='text', time=1.0, extra=[1, 2])
    hook = RecordingLoggerHook()
    assert hook.get_loggable_tags(runner) == {
        'val/acc': 0.5, 'val/extra': [1, 2], 'learning_rate': 0.2, 'momentum': 0}
    assert hook.get_loggable_tags(runner, allow_scalar=False, allow_text=True, add_mode=False,
                                  tags_to_skip=()) == {
        'note': 'text', 'extra': [1, 2], 'learning_rate': 0.2, 'momentum': 0}
    assert hook.get_lr_tags(runner) == {'learning_rate': 0.2}
    assert hook.get_momentum_tags(runner) == {'momentum': 0}


@pytest.mark.parametrize('value, kwargs, expected', [
    (1.5, {}, True), (3, {}, True), (np.array(2.0), {}, True),
    (np.array(2.0), dict(include_np=False), False), (np.array([1.0]), {}, False),
    (torch.tensor([1.0]), {}, True), (torch.tensor([1.0]), dict(include_torch=False), False),
    (torch.tensor([1.0, 2.0]), {}, False), ('a', {}, False),
])
def test_is_scalar_as_mmcv(value, kwargs, expected):
    assert LoggerHook.is_scalar(value, **kwargs) is expected
