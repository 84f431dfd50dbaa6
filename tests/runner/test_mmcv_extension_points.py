"""mmcv 1.x's extension points, as 1.x-era code uses them: subclasses, attributes, keywords.

Every expectation is what mmcv 1.7.2 does with the same code, read from its
source (``mmcv/runner/hooks/lr_updater.py``, ``momentum_updater.py``,
``checkpoint.py``, ``base_runner.py``, ``epoch_based_runner.py``,
``iter_based_runner.py``). Issue 21.
"""

import math

import pytest

from mtrain.hooks import Hook, OptimizerHook
from mtrain.hooks.lr_updater import (CosineAnnealingLrUpdaterHook, FixedLrUpdaterHook,
                                     LrUpdaterHook)
from mtrain.hooks.momentum_updater import MomentumUpdaterHook


def _lr(runner):
    return runner.optimizer.param_groups[0]['lr']


class _Recorder(Hook):
    priority = 'LOWEST'

    def __init__(self, read=_lr):
        self.read, self.rows = read, []

    def before_train_iter(self, runner):
        self.rows.append(self.read(runner))


def _train(make_runner, loader, *hooks, max_epochs=2, momentum=0.9):
    runner = make_runner(max_len=max_epochs, momentum=momentum)
    runner.register_hook(OptimizerHook())
    for hook in hooks:
        runner.register_hook(hook)
    runner.run([loader], [('train', 1)])
    return runner


# -- LrUpdaterHook: the methods a subclass replaces are called where mmcv calls them ---------
class _Calls(FixedLrUpdaterHook):
    """Records each of mmcv's override points as the stages call them."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.calls = []

    def get_regular_lr(self, runner):
        self.calls.append('regular')
        return super().get_regular_lr(runner)

    def get_warmup_lr(self, cur_iters):
        self.calls.append(f'warmup {cur_iters}')
        return super().get_warmup_lr(cur_iters)

    def _set_lr(self, runner, lr_groups):
        self.calls.append('set')
        super()._set_lr(runner, lr_groups)


def test_override_points_are_called_as_mmcv_by_iteration(make_runner, toy_loader):
    """Before: get_regular_lr / get_warmup_lr / _set_lr overrides were never called."""
    hook = _Calls(by_epoch=False, warmup='linear', warmup_iters=2)
    _train(make_runner, toy_loader, hook, max_epochs=1)
    per_iter = (['regular', 'warmup 0', 'set', 'regular', 'warmup 1', 'set']
                + ['regular', 'set'] * (len(toy_loader) - 2))
    assert hook.calls == per_iter


def test_override_points_are_called_as_mmcv_by_epoch(make_runner, toy_loader):
    hook = _Calls(by_epoch=True, warmup='linear', warmup_iters=2)
    _train(make_runner, toy_loader, hook, max_epochs=2)
    # epoch 0: before_train_epoch sets the regular lr; iterations 0, 1 warm up; iteration 2
    # (== warmup_iters) sets the regular lr; epoch 1: before_train_epoch only.
    assert hook.calls == ['regular', 'set', 'warmup 0', 'set', 'warmup 1', 'set', 'set',
                          'regular', 'set']


class _HalfBaseLr(FixedLrUpdaterHook):
    """Assigns self.base_lr after mmcv's before_run (as layer-decay hooks of that era do)."""

    def before_run(self, runner):
        super().before_run(runner)
        self.base_lr = [lr * 0.5 for lr in self.base_lr]


@pytest.mark.parametrize('by_epoch', [True, False])
def test_base_lr_is_a_writable_attribute_the_schedule_uses(make_runner, toy_loader, by_epoch):
    """Before: ``self.base_lr = ...`` raised AttributeError (a read-only property)."""
    record = _Recorder()
    _train(make_runner, toy_loader, _HalfBaseLr(by_epoch=by_epoch), record)
    assert record.rows == [0.05] * (2 * len(toy_loader))


class _YoloxStyle(CosineAnnealingLrUpdaterHook):
    """A YOLOX-era hook (mmdet 2.x): its own warmup from ``self.base_lr``, a flat tail."""

    def __init__(self, num_last_epochs, **kwargs):
        self.num_last_epochs = num_last_epochs
        super().__init__(**kwargs)

    def get_warmup_lr(self, cur_iters):
        k = self.warmup_ratio * pow((cur_iters + 1) / float(self.warmup_iters), 2)
        return [lr * k for lr in self.base_lr]

    def get_lr(self, runner, base_lr):
        last_iter = len(runner.data_loader) * self.num_last_epochs
        progress, max_progress = runner.iter + 1, runner.max_iters
        target = base_lr * self.min_lr_ratio
        if progress >= max_progress - last_iter:
            return target
        return target + 0.5 * (base_lr - target) * (1 + math.cos(math.pi * (
            progress - self.warmup_iters) / (max_progress - self.warmup_iters - last_iter)))


def test_a_yolox_style_subclass_trains_with_its_own_warmup_and_lr(make_runner, toy_loader):
    record = _Recorder()
    hook = _YoloxStyle(num_last_epochs=1, min_lr_ratio=0.05, by_epoch=False, warmup='exp',
                       warmup_iters=4, warmup_ratio=1)
    _train(make_runner, toy_loader, hook, record, max_epochs=3)
    n = len(toy_loader)
    expected = [0.1 * ((i + 1) / 4) ** 2 for i in range(4)]
    expected += [0.005 + 0.5 * 0.095 * (1 + math.cos(math.pi * (i + 1 - 4) / (3 * n - 4 - n)))
                 for i in range(4, 2 * n - 1)]
    expected += [0.005] * (n + 1)
    assert record.rows == pytest.approx(expected, rel=1e-12)


class _RegularLrReader(FixedLrUpdaterHook):
    """Reads and assigns ``self.regular_lr`` in its own warmup (mmcv's attribute)."""

    def get_warmup_lr(self, cur_iters):
        self.regular_lr = [lr * 2 for lr in self.regular_lr]  # writable, as in mmcv
        return [lr * 0.1 for lr in self.regular_lr]


def test_regular_lr_is_a_writable_attribute(make_runner, toy_loader):
    record = _Recorder()
    hook = _RegularLrReader(by_epoch=True, warmup='constant', warmup_iters=2)
    _train(make_runner, toy_loader, hook, record, max_epochs=1)
    # iteration 0: 0.1*2*0.1; iteration 1: 0.2*2*0.1; iteration 2 (== warmup_iters): regular_lr
    assert record.rows[:4] == pytest.approx([0.02, 0.04, 0.4, 0.4])
    assert hook.regular_lr == pytest.approx([0.4])


def test_a_policy_subclass_of_the_base_gets_runner_and_base_lr(make_runner, toy_loader):
    class Halving(LrUpdaterHook):
        def get_lr(self, runner, base_lr):
            return base_lr / (2 ** runner.epoch)

    record = _Recorder()
    _train(make_runner, toy_loader, Halving(), record, max_epochs=2)
    assert record.rows == [0.1] * len(toy_loader) + [0.05] * len(toy_loader)


# -- MomentumUpdaterHook --------------------------------------------------------------------
class _MomentumCalls(MomentumUpdaterHook):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.calls = []

    def get_momentum(self, runner, base_momentum):
        return base_momentum - 0.01 * runner.iter

    def get_regular_momentum(self, runner):
        self.calls.append('regular')
        return super().get_regular_momentum(runner)

    def get_warmup_momentum(self, cur_iters):
        self.calls.append(f'warmup {cur_iters}')
        return [0.5 for _ in self.regular_momentum]

    def _set_momentum(self, runner, momentum_groups):
        self.calls.append('set')
        super()._set_momentum(runner, momentum_groups)


def test_momentum_override_points_and_attributes(make_runner, toy_loader):
    record = _Recorder(lambda runner: runner.optimizer.param_groups[0]['momentum'])
    hook = _MomentumCalls(by_epoch=False, warmup='linear', warmup_iters=2)
    _train(make_runner, toy_loader, hook, record, max_epochs=1)
    n = len(toy_loader)
    assert hook.calls == (['regular', 'warmup 0', 'set', 'regular', 'warmup 1', 'set']
                          + ['regular', 'set'] * (n - 2))
    assert record.rows == pytest.approx([0.5, 0.5] + [0.9 - 0.01 * i for i in range(2, n)])
    hook.base_momentum = [0.5]  # a plain attribute, as in mmcv
    assert hook.base_momentum == [0.5]


# -- hook methods replaced after registration -----------------------------------------------
def test_a_hook_method_assigned_on_the_instance_mid_run_is_called(make_runner, toy_loader):
    """Before: the runner kept the bound methods of registration time."""
    seen = []

    class Patcher(Hook):
        def after_train_iter(self, runner):
            if runner.iter == 2:  # replace a method of this hook, add one at a new stage
                self.after_train_iter = lambda runner: seen.append(('after', runner.iter))
                self.before_train_iter = lambda runner: seen.append(('before', runner.iter))

    _train(make_runner, toy_loader, Patcher(), max_epochs=1)
    n = len(toy_loader)
    expected = []
    for it in range(3, n):
        expected += [('before', it), ('after', it)]
    assert seen == expected


def test_a_hook_method_replaced_on_the_class_after_registration_is_called(
        make_runner, toy_loader, monkeypatch):
    seen = []

    class Counting(Hook):
        def after_train_iter(self, runner):
            if runner.iter == 1:
                monkeypatch.setattr(Counting, 'after_train_iter',
                                    lambda self, runner: seen.append(runner.iter))

    _train(make_runner, toy_loader, Counting(), max_epochs=1)
    assert seen == list(range(2, len(toy_loader)))
