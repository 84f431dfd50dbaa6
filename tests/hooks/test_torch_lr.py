"""policy='Torch': any torch.optim.lr_scheduler, stepped once per optimizer update."""

import pytest
import torch

from mtrain.hooks import (CheckpointHook, GradientCumulativeOptimizerHook, Hook, OptimizerHook,
                          TorchLrUpdaterHook)
from mtrain.hooks.schedules.torch_lr import fill_placeholders
from mtrain.runner.training_hooks import build_training_hooks
from mtrain.utils import ConfigError


class LrRecorder(Hook):
    """lr and momentum used by every iteration."""

    priority = 'LOWEST'

    def __init__(self):
        self.lrs, self.momenta = [], []

    def before_train_iter(self, runner):
        self.lrs.append(runner.optimizer.param_groups[0]['lr'])
        self.momenta.append(runner.optimizer.param_groups[0]['momentum'])


def _plain_pytorch_lrs(scheduler_cls, updates, **kwargs):
    """The lr of each update in the canonical loop ``optimizer.step(); scheduler.step()``."""
    optimizer = torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=0.1, momentum=0.9)
    scheduler = scheduler_cls(optimizer, **kwargs)
    lrs = []
    for _ in range(updates):
        lrs.append(optimizer.param_groups[0]['lr'])
        optimizer.step()
        scheduler.step()
    return lrs


def _run(make_runner, loader, scheduler, cumulative_iters=1, **runner_kwargs):
    runner = make_runner(momentum=0.9, **runner_kwargs)
    runner.register_hook(TorchLrUpdaterHook(scheduler=scheduler), 'VERY_HIGH')
    runner.register_hook(GradientCumulativeOptimizerHook(cumulative_iters=cumulative_iters))
    recorder = LrRecorder()
    runner.register_hook(recorder)
    runner.run([loader], [('train', 1)])
    return runner, recorder


def test_one_cycle_over_the_whole_run_matches_plain_pytorch(make_runner, toy_loader):
    # 2 epochs of 8 batches: total_steps becomes 16.
    _, recorder = _run(make_runner, toy_loader, dict(type='OneCycleLR', max_lr=0.1,
                                                     total_steps='{num_updates}'),
                       by_epoch=True, max_len=2)
    expected = _plain_pytorch_lrs(torch.optim.lr_scheduler.OneCycleLR, 16, max_lr=0.1,
                                  total_steps=16)
    assert recorder.lrs == pytest.approx(expected, rel=1e-12)


def test_stepped_once_per_update_under_accumulation(make_runner, toy_loader):
    _, recorder = _run(make_runner, toy_loader, dict(type='OneCycleLR', max_lr=0.1,
                                                     total_steps='{num_updates}'),
                       cumulative_iters=3, by_epoch=False, max_len=8)
    # 8 iterations in windows of 3: updates 0, 1, 2 (the last window is short).
    expected = _plain_pytorch_lrs(torch.optim.lr_scheduler.OneCycleLR, 3, max_lr=0.1,
                                  total_steps=3)
    assert recorder.lrs == pytest.approx([expected[0]] * 3 + [expected[1]] * 3
                                         + [expected[2]] * 2, rel=1e-12)


def test_epoch_placeholders_under_the_iter_runner(make_runner, toy_loader):
    # 8 batches per epoch, 20 iterations: milestones at 8 and 16 updates; 3 epochs.
    runner, recorder = _run(make_runner, toy_loader, dict(
        type='MultiStepLR', milestones=['{updates_per_epoch}', '{updates_per_epoch} * 2'],
        gamma=0.1), by_epoch=False, max_len=20)
    assert recorder.lrs == pytest.approx([0.1] * 8 + [0.01] * 8 + [0.001] * 4, rel=1e-12)
    assert runner.hooks[0].scheduler.milestones == {8: 1, 16: 1}


def test_placeholder_arithmetic():
    values = {'num_updates': 100, 'updates_per_epoch': 10, 'max_epochs': 10, 'max_iters': 400}
    cfg = {'a': '{num_updates}', 'b': ['{updates_per_epoch} * 3', '{max_iters} // 3'],
           'c': '{num_updates} / 8', 'd': 'cos', 'e': 5}
    assert fill_placeholders(cfg, values) == {'a': 100, 'b': [30, 133], 'c': 12.5, 'd': 'cos',
                                              'e': 5}


@pytest.mark.parametrize('scheduler', [
    dict(type='OneCycleLR', max_lr=0.2, total_steps='{num_updates}'),  # closed form, momentum
    # recursive: each lr is computed from the group's current lr, and building it scales that
    dict(type='LinearLR', start_factor=0.25, total_iters='{num_updates}'),
])
def test_resume_gives_the_same_lr_momentum_and_weights(make_runner, toy_loader, tmp_path,
                                                       scheduler):
    def runner_with_hooks():
        runner = make_runner(momentum=0.9, by_epoch=False, max_len=10)
        runner.register_hook(TorchLrUpdaterHook(scheduler=scheduler), 'VERY_HIGH')
        runner.register_hook(OptimizerHook())
        recorder = LrRecorder()
        runner.register_hook(recorder)
        return runner, recorder

    straight, full = runner_with_hooks()
    straight.register_hook(CheckpointHook(interval=5, by_epoch=False))
    straight.run([toy_loader], [('train', 1)])
    path = str(tmp_path / 'iter_5.pth')
    state = torch.load(path, weights_only=True)['hooks']['TorchLrUpdaterHook']
    assert state['stepped'] == 4  # the 5th update's step happens before iteration 6

    resumed, recorder = runner_with_hooks()
    resumed.resume(path)
    resumed.run([toy_loader], [('train', 1)])
    assert recorder.lrs == full.lrs[5:] and recorder.momenta == full.momenta[5:]
    for a, b in zip(resumed.model_wrapper.module.parameters(), straight.model_wrapper.module.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_selected_by_lr_config_policy_torch():
    [(hook, priority)] = build_training_hooks(lr_config=dict(
        policy='Torch', scheduler=dict(type='CosineAnnealingLR', T_max='{num_updates}')),
        timer_config=None)
    assert isinstance(hook, TorchLrUpdaterHook) and priority == 'VERY_HIGH'


@pytest.mark.parametrize('scheduler, key, match', [
    (dict(type='OneCycleLr', max_lr=0.1), 'lr_config.scheduler.type', "Did you mean 'OneCycleLR'"),
    (dict(type='ReduceLROnPlateau'), 'lr_config.scheduler.type', 'steps on a metric'),
    (dict(type='StepLR', step_size=2, gama=0.5), 'lr_config.scheduler.gama', "'gamma'"),
    (dict(type='OneCycleLR', max_lr=0.1, total_steps='{num_update}'),
     'lr_config.scheduler.total_steps', "Did you mean 'num_updates'"),
    (dict(max_lr=0.1), 'lr_config.scheduler', "dict\\(type='OneCycleLR'"),
])
def test_config_mistakes_fail_at_build_time(scheduler, key, match):
    with pytest.raises(ConfigError, match=match) as info:
        build_training_hooks(lr_config=dict(policy='Torch', scheduler=scheduler),
                             timer_config=None)
    assert info.value.key == key


def test_a_bad_expression_names_the_syntax():
    with pytest.raises(ConfigError, match=r"numbers, \+ - \* / // only"):
        fill_placeholders('{num_updates} ** 2', {'num_updates': 4})
