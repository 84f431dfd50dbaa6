"""The loops: hook call order, priorities, counters, IterBasedRunner epochs."""

import pytest
import torch

from mtrain.hooks import Hook, OptimizerHook
from mtrain.runner import EpochBasedRunner


class Recorder(Hook):
    def __init__(self, calls, name='rec'):
        self.calls, self.name = calls, name

    def before_run(self, runner):
        self.calls.append('before_run')

    def after_run(self, runner):
        self.calls.append('after_run')

    def before_train_epoch(self, runner):
        self.calls.append('before_train_epoch')

    def after_train_epoch(self, runner):
        self.calls.append('after_train_epoch')

    def before_train_iter(self, runner):
        self.calls.append('before_train_iter')

    def after_train_iter(self, runner):
        self.calls.append('after_train_iter')

    def before_val_epoch(self, runner):
        self.calls.append('before_val_epoch')

    def after_val_epoch(self, runner):
        self.calls.append('after_val_epoch')


def test_epoch_runner_calls_hooks_in_mmcv_order(make_runner, toy_loader):
    calls = []
    runner = make_runner(max_len=2)
    runner.register_hook(OptimizerHook())
    runner.register_hook(Recorder(calls))
    runner.run([toy_loader], [('train', 1)])
    epoch = ['before_train_epoch'] + ['before_train_iter', 'after_train_iter'] * 8 + \
        ['after_train_epoch']
    assert calls == ['before_run'] + epoch * 2 + ['after_run']
    assert (runner.epoch, runner.iter, runner.num_updates) == (2, 16, 16)


def test_val_workflow_phase_runs_between_train_epochs(make_runner, toy_loader):
    calls = []
    runner = make_runner(max_len=2)
    runner.register_hook(OptimizerHook())
    runner.register_hook(Recorder(calls))
    runner.run([toy_loader, toy_loader], [('train', 1), ('val', 1)])
    assert calls.count('before_val_epoch') == 2
    assert calls.index('before_val_epoch') > calls.index('after_train_epoch')
    assert runner.num_updates == 16  # the val phase never steps


def test_priorities_order_hooks_and_ties_keep_registration_order(make_runner):
    runner = make_runner()
    names = []
    for name, priority in [('normal1', 'NORMAL'), ('low', 'LOW'), ('high', 'HIGH'),
                           ('normal2', 50), ('highest', 'HIGHEST')]:
        hook = Recorder([], name)
        runner.register_hook(hook, priority)
    names = [h.name for h in runner.hooks]
    assert names == ['highest', 'high', 'normal1', 'normal2', 'low']
    assert [h.priority for h in runner.hooks] == [0, 30, 50, 50, 70]


def test_idle_hooks_are_not_called_at_stages_they_do_not_override(make_runner):
    class OnlyBeforeRun(Hook):
        def before_run(self, runner):
            pass

    runner = make_runner()
    runner.register_hook(OnlyBeforeRun())
    assert runner._stage_hooks['before_run'] and not runner._stage_hooks['after_train_iter']


def test_points_inside_the_iteration_are_called_only_when_a_hook_uses_them(make_runner,
                                                                           toy_loader):
    """``hooked_stages`` says where hooks act; a hook registered mid-run is called at once."""
    class Inner(Hook):
        def before_forward(self, runner):
            calls.append('before_forward')

        def before_optimizer_step(self, runner):
            calls.append('before_optimizer_step')

    class AddsInnerHook(Hook):
        def after_train_iter(self, runner):
            if runner.iter == 2:
                runner.register_hook(Inner())

    calls = []
    runner = make_runner(max_len=1)
    runner.register_hook(OptimizerHook())
    assert 'before_forward' not in runner.hooked_stages
    assert {'before_run', 'after_train_iter'} <= runner.hooked_stages
    runner.register_hook(AddsInnerHook())
    runner.run([toy_loader], [('train', 1)])
    assert {'before_forward', 'before_optimizer_step'} <= runner.hooked_stages
    later = len(toy_loader) - 3  # registered during iteration 3: called from iteration 4 on
    assert calls == ['before_forward', 'before_optimizer_step'] * later


def test_generic_before_iter_falls_back_for_train_and_val(make_runner):
    class Generic(Hook):
        def before_iter(self, runner):
            pass

    assert set(Generic().triggered_stages()) == {'before_train_iter', 'before_val_iter'}


def test_the_runner_calls_the_method_that_does_the_work(make_runner, toy_loader):
    class Generic(Hook):  # only the generic point: called directly, train and val
        def after_iter(self, runner):
            calls.append(('generic', runner.mode))

    class Specific(Generic):  # a train override that extends the generic one
        def after_train_iter(self, runner):
            calls.append(('specific', runner.mode))
            super().after_train_iter(runner)

    calls = []
    runner = make_runner(max_len=1)
    generic, specific = Generic(), Specific()
    runner.register_hook(generic)
    runner.register_hook(specific)
    assert runner._stage_calls['after_train_iter'] == ((generic, 'after_iter'),
                                                       (specific, 'after_train_iter'))
    runner.run([toy_loader, toy_loader], [('train', 1), ('val', 1)])
    per_iter = len(toy_loader)
    assert calls[:3] == [('generic', 'train'), ('specific', 'train'), ('generic', 'train')]
    assert calls.count(('specific', 'train')) == per_iter
    assert calls.count(('generic', 'train')) == 2 * per_iter
    assert calls.count(('generic', 'val')) == 2 * per_iter


def test_unknown_priority_name_is_a_clear_error(make_runner):
    with pytest.raises(ValueError, match='unknown priority'):
        make_runner().register_hook(Hook(), 'MEDIUM')


def test_iter_runner_counts_epochs_and_calls_epoch_points_once(make_runner, toy_loader):
    calls = []

    class EpochSpy(Hook):
        def before_epoch(self, runner):
            calls.append('before_epoch')

        def after_epoch(self, runner):
            calls.append('after_epoch')

        def after_train_iter(self, runner):
            calls.append(runner.epoch)

    runner = make_runner(by_epoch=False, max_len=20)
    runner.register_hook(OptimizerHook())
    runner.register_hook(EpochSpy())
    runner.run([toy_loader], [('train', 1)])
    assert calls[0] == 'before_epoch' and calls[-1] == 'after_epoch'
    epochs = calls[1:-1]
    # mmcv 1.7.2 reads the epoch before fetching the batch: a new pass counts from its 2nd iteration
    assert epochs == [0] * 9 + [1] * 8 + [2] * 3
    assert runner.iter == 20 and runner.num_updates == 20


def test_training_lowers_the_loss(make_runner, toy_loader):
    runner = make_runner(max_len=10, lr=0.5)
    runner.register_hook(OptimizerHook())
    losses = []

    class LossSpy(Hook):
        def after_train_iter(self, runner):
            losses.append(runner.outputs['loss'].item())

    runner.register_hook(LossSpy())
    runner.run([toy_loader], [('train', 1)])
    assert sum(losses[-8:]) / 8 < 0.5 * sum(losses[:8]) / 8


def test_runner_rejects_both_lengths_and_bad_workflow(make_runner, toy_model, toy_loader):
    with pytest.raises(ValueError, match='not both'):
        EpochBasedRunner(toy_model, max_epochs=1, max_iters=1)
    with pytest.raises(ValueError, match='positive integer'):
        EpochBasedRunner(toy_model, max_epochs=0)
    with pytest.raises(ValueError, match="phase 'test'"):
        make_runner().run([toy_loader], [('test', 1)])


def test_should_stop_ends_the_run_cleanly(make_runner, toy_loader):
    class StopAfterFirstEpoch(Hook):
        def after_train_epoch(self, runner):
            runner.should_stop = True

    runner = make_runner(max_len=5)
    runner.register_hook(OptimizerHook())
    runner.register_hook(StopAfterFirstEpoch())
    runner.run([toy_loader], [('train', 1)])
    assert runner.epoch == 1


def test_current_lr_and_momentum(make_runner):
    runner = make_runner(lr=0.3, momentum=0.8)
    assert runner.current_lr() == [0.3]
    assert runner.current_momentum() == [0.8]
    adam = make_runner()
    adam.optimizer = torch.optim.Adam(adam.model.parameters(), betas=(0.7, 0.99))
    assert adam.current_momentum() == [0.7]
