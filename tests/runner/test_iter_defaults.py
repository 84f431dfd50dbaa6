"""IterBasedRunner counts iterations by default, as mmcv 1.x's register_training_hooks."""

import json
import os

from mtrain.hooks import OptimizerHook
from mtrain.defaults import fill_runner_defaults, runner_by_epoch
from mtrain.runner import IterBasedRunner
from mtrain.runner.training_hooks import with_runner_defaults


def test_iter_runner_checkpoints_logs_and_decays_by_iteration(make_runner, toy_loader, tmp_path):
    runner = make_runner(by_epoch=False, max_len=24)
    runner.register_training_hooks(
        lr_config=dict(policy='step', step=[8, 16]), optimizer_config=dict(),
        checkpoint_config=dict(interval=8), log_config=dict(interval=4),
        momentum_config=dict(policy='step', step=[100]))
    runner.run([toy_loader], [('train', 1)])
    assert {'iter_8.pth', 'iter_16.pth', 'iter_24.pth'} <= set(os.listdir(tmp_path))
    assert abs(runner.current_lr()[0] - 0.1 * 0.1 ** 2) < 1e-12
    logs = [n for n in os.listdir(tmp_path) if n.endswith('.log.json')]
    with open(tmp_path / logs[0]) as f:
        lines = [json.loads(line) for line in f if '"mode"' in line]
    assert [line['iter'] for line in lines if line['mode'] == 'train'] == [4, 8, 12, 16, 20, 24]
    assert [h.by_epoch for h in runner.hooks if hasattr(h, 'by_epoch')] == [False] * 4


def test_explicit_by_epoch_and_hook_objects_are_kept():
    hook = OptimizerHook()
    cfgs = with_runner_defaults('IterBasedRunner',
                                lr_config=dict(policy='step', step=[1], by_epoch=True),
                                checkpoint_config=hook, log_config=dict(
                                    interval=5,
                                    hooks=[dict(type='TextLoggerHook', by_epoch=True)]),
                                momentum_config=None)
    assert cfgs['lr_config']['by_epoch'] is True and cfgs['checkpoint_config'] is hook
    assert cfgs['log_config']['hooks'][0]['by_epoch'] is True and cfgs['momentum_config'] is None
    torch_lr = dict(type='TorchLrUpdaterHook', scheduler=dict(type='StepLR', step_size=2))
    # TorchLrUpdaterHook has no by_epoch argument: nothing is added
    assert with_runner_defaults('IterBasedRunner', lr_config=torch_lr)['lr_config'] == torch_lr


def test_iter_runner_with_torch_policy_trains(make_runner, toy_loader):
    """Issue 22 item 6: policy='Torch' has no by_epoch; no default may be forced onto it."""
    runner = make_runner(by_epoch=False, max_len=6)
    runner.register_training_hooks(
        lr_config=dict(policy='Torch', scheduler=dict(type='StepLR', step_size=2, gamma=0.5)),
        optimizer_config=dict(), log_config=dict(interval=2))
    runner.run([toy_loader], [('train', 1)])
    assert abs(runner.current_lr()[0] - 0.1 * 0.5 ** 2) < 1e-12  # the lr of update 5


def test_defaults_table_is_applied_once_and_idempotent():
    cfgs = dict(lr_config=dict(policy='step', step=[1]), evaluation=dict(interval=2),
                log_config=dict(interval=5), checkpoint_config=None)
    once = fill_runner_defaults('IterBasedRunner', cfgs)
    assert fill_runner_defaults('IterBasedRunner', once) == once
    assert once['lr_config']['by_epoch'] is False and once['evaluation']['by_epoch'] is False
    assert once['log_config']['hooks'] == [dict(type='TextLoggerHook', by_epoch=False)]
    assert 'by_epoch' not in cfgs['lr_config']  # inputs untouched

    class MyIterRunner(IterBasedRunner):
        pass

    assert runner_by_epoch(MyIterRunner) is False and runner_by_epoch('EpochBasedRunner')


def test_an_epoch_runner_leaves_by_epoch_to_each_hook_class(make_runner, toy_loader):
    # mmcv 1.7.2's EpochBasedRunner writes no by_epoch; OneCycle's class default is False and
    # it refuses True, so a 1.x OneCycle config must train under an EpochBasedRunner.
    cfgs = dict(lr_config=dict(policy='OneCycle', max_lr=0.1))
    assert fill_runner_defaults('EpochBasedRunner', cfgs) == cfgs
    runner = make_runner(max_len=2)
    runner.register_training_hooks(lr_config=dict(policy='OneCycle', max_lr=0.1),
                                   optimizer_config=dict())
    runner.run([toy_loader], [('train', 1)])
    assert runner.current_lr()[0] < 0.1 / 25  # annealed past its start, max_lr / div_factor
