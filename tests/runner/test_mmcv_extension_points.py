"""mmcv 1.x's extension points, as 1.x-era code uses them: subclasses, attributes, keywords.

Every expectation is what mmcv 1.7.2 does with the same code, read from its
source (``mmcv/runner/hooks/lr_updater.py``, ``momentum_updater.py``,
``checkpoint.py``, ``base_runner.py``, ``epoch_based_runner.py``,
``iter_based_runner.py``). Issue 21.
"""

import logging
import math
import os
import os.path as osp

import pytest
import torch

from mtrain.hooks import CheckpointHook, EMAHook, Hook, OptimizerHook
from mtrain.hooks.lr_updater import (CosineAnnealingLrUpdaterHook, CyclicLrUpdaterHook,
                                     FixedLrUpdaterHook, LrUpdaterHook, StepLrUpdaterHook)
from mtrain.hooks.momentum_updater import (CosineAnnealingMomentumUpdaterHook,
                                           MomentumUpdaterHook)
from mtrain.parallel import ModelWrapper
from mtrain.registry import HOOKS, build
from mtrain.runner import CheckpointError, EpochBasedRunner, load_checkpoint
from mtrain.runner.checkpoint import load_checkpoint_with_prefix
from mtrain.utils.errors import ConfigError


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


# -- CheckpointHook(**kwargs) and runner.save_checkpoint -------------------------------------
def test_checkpoint_hook_forwards_meta_to_every_checkpoint(make_runner, toy_loader, tmp_path):
    """Before: CheckpointHook(meta=...) raised TypeError (mmcv forwards **kwargs)."""
    runner = make_runner(max_len=2, meta=dict(seed=3, CLASSES='runner wins'))
    runner.register_training_hooks(
        optimizer_config={}, timer_config=None,
        checkpoint_config=dict(interval=1, meta=dict(CLASSES=('a', 'b'), mmcls_version='0.25')))
    runner.run([toy_loader], [('train', 1)])
    for name in ('epoch_1.pth', 'epoch_2.pth'):
        meta = torch.load(tmp_path / name, weights_only=True)['meta']
        # mmcv: the hook's meta, updated with runner.meta, then the position
        assert (meta['mmcls_version'], meta['CLASSES'], meta['seed']) == ('0.25', 'runner wins', 3)
    assert meta['epoch'] == 2


def test_checkpoint_hook_refuses_a_keyword_save_checkpoint_does_not_take(make_runner,
                                                                        toy_loader):
    runner = make_runner(max_len=1)
    runner.register_hook(CheckpointHook(interval=1, bogus=1))
    with pytest.raises(TypeError, match='bogus'):
        runner.run([toy_loader], [('train', 1)])
    runner = make_runner(max_len=1)
    runner.register_training_hooks(checkpoint_config=dict(interval=1, bogus=1))
    with pytest.raises(TypeError, match='bogus'):  # from a config: before the first iteration
        runner.run([toy_loader], [('train', 1)])
    assert runner.iter == 0


def test_checkpoint_hook_out_dir_gets_the_work_dir_name_as_mmcv(make_runner, toy_loader,
                                                                 tmp_path):
    """mmcv >= 1.3.16: CheckpointHook(out_dir=X) writes X/<work dir name>/epoch_N.pth."""
    out = tmp_path / 'elsewhere'
    runner = make_runner(max_len=1)
    runner.register_training_hooks(optimizer_config={}, timer_config=None,
                                   checkpoint_config=dict(interval=1, out_dir=str(out)))
    runner.run([toy_loader], [('train', 1)])
    assert sorted(os.listdir(out / tmp_path.name)) == ['epoch_1.pth', 'latest.pth']


class _SavesEvery(Hook):
    """A 1.x-era hook that saves with the runner's own numbering (as mmcv's hooks call it)."""

    def __init__(self, out_dir, by_epoch):
        self.out_dir, self.by_epoch = out_dir, by_epoch

    def after_train_iter(self, runner):
        if not self.by_epoch and self.every_n_iters(runner, 2):
            runner.save_checkpoint(self.out_dir, filename_tmpl='ckpt_{}.pth',
                                   create_symlink=False)

    def after_train_epoch(self, runner):
        if self.by_epoch:
            runner.save_checkpoint(self.out_dir, filename_tmpl='ckpt_{}.pth',
                                   create_symlink=False)


@pytest.mark.parametrize('by_epoch', [True, False], ids=['EpochBasedRunner', 'IterBasedRunner'])
def test_save_checkpoint_numbers_files_as_mmcv(make_runner, toy_loader, tmp_path, by_epoch):
    """Before: under IterBasedRunner a template was numbered by epoch and overwrote itself."""
    out = tmp_path / 'ckpts'
    runner = make_runner(by_epoch=by_epoch, max_len=2 if by_epoch else 6)
    runner.register_hook(OptimizerHook())
    runner.register_hook(_SavesEvery(str(out), by_epoch))
    runner.run([toy_loader], [('train', 1)])
    # mmcv: filename_tmpl.format(epoch + 1) / format(iter + 1) at the hook's call
    expected = ['ckpt_1.pth', 'ckpt_2.pth'] if by_epoch else ['ckpt_2.pth', 'ckpt_4.pth',
                                                               'ckpt_6.pth']
    assert sorted(os.listdir(out)) == expected
    last = torch.load(out / expected[-1], weights_only=True)
    assert last['meta']['iter'] == (2 * len(toy_loader) if by_epoch else 6)


def test_a_fresh_runner_names_its_checkpoint_as_mmcv(make_runner, tmp_path):
    epoch_runner, iter_runner = make_runner(max_len=2), make_runner(by_epoch=False, max_len=4)
    assert osp.basename(epoch_runner.save_checkpoint(str(tmp_path))) == 'epoch_1.pth'
    assert osp.basename(iter_runner.save_checkpoint(str(tmp_path))) == 'iter_1.pth'


# -- runner.model as passed ---------------------------------------------------------------
class _ReadsFc(Hook):
    def before_train_iter(self, runner):
        self.weight = runner.model.fc1.weight  # a 1.x hook reading the model directly


def test_runner_model_is_the_model_passed(make_runner, toy_loader, toy_model):
    """Before: runner.model was a ModelWrapper (hooks reading runner.model.fc1 broke)."""
    runner = make_runner(toy_model, max_len=1)
    assert runner.model is toy_model and runner.model_name == 'ToyModel'
    reader = _ReadsFc()
    runner.register_hook(OptimizerHook())
    runner.register_hook(reader)
    runner.register_hook(EMAHook(momentum=0.5))  # works on a plain module too
    runner.run([toy_loader], [('train', 1)])
    assert reader.weight is toy_model.fc1.weight
    assert runner.model_wrapper.module is toy_model


def test_a_wrapper_passed_stays_runner_model(make_runner, toy_model):
    wrapped = ModelWrapper(toy_model)
    runner = make_runner(wrapped)
    assert runner.model is wrapped and runner.model_wrapper is wrapped
    assert runner.model_name == 'ToyModel'


def test_batch_processor_function_warns_as_mmcv(make_runner):
    def batch_processor(model, data, train_mode, **kwargs):
        return {}

    with pytest.warns(DeprecationWarning, match='batch_processor is deprecated'):
        make_runner(batch_processor=batch_processor)


# -- exception classes 1.x code catches -------------------------------------------------------
@pytest.mark.parametrize('make', [
    lambda: StepLrUpdaterHook(step=[0]),                                  # mmcv: assert s > 0
    lambda: StepLrUpdaterHook(step=1, warmup='linear', warmup_iters=0),   # assert warmup_iters > 0
    lambda: StepLrUpdaterHook(step=1, warmup='linear', warmup_iters=2, warmup_ratio=2),
    lambda: CosineAnnealingLrUpdaterHook(min_lr=0, min_lr_ratio=0.1),    # assert one of them
    lambda: CyclicLrUpdaterHook(by_epoch=True),                           # assert not by_epoch
    lambda: CyclicLrUpdaterHook(step_ratio_up=1.5),
    lambda: CosineAnnealingMomentumUpdaterHook(min_momentum=None),
])
def test_hook_arguments_mmcv_asserted_are_assertion_errors(make):
    """Before: a plain ValueError, which 1.x ``except AssertionError`` does not catch."""
    with pytest.raises(AssertionError):
        make()
    with pytest.raises(ValueError):  # mtrain's documented type still holds
        make()


def test_config_errors_are_catchable_as_what_mmcv_raised():
    with pytest.raises(AssertionError):  # an invalid value mmcv asserted on, through a config
        build(dict(type='StepLrUpdaterHook', step=[0]), HOOKS, 'lr_config')
    with pytest.raises(TypeError):  # an unknown keyword: mmcv's TypeError
        build(dict(type='StepLrUpdaterHook', step=1, bogus=1), HOOKS, 'lr_config')
    with pytest.raises(ConfigError):
        build(dict(type='StepLrUpdaterHook', step=1, bogus=1), HOOKS, 'lr_config')


def test_runner_and_checkpoint_errors_are_catchable_as_mmcvs(make_runner, tmp_path, toy_model,
                                                              toy_loader):
    with pytest.raises(AssertionError):  # mmcv: assert len(data_loaders) == len(workflow)
        make_runner().run([toy_loader], [('train', 1), ('val', 1)])
    with pytest.raises(AssertionError):  # mmcv: assert self._max_epochs is not None
        EpochBasedRunner(toy_model, optimizer=torch.optim.SGD(toy_model.parameters(), lr=0.1),
                         logger=logging.getLogger('x')).run([toy_loader], [('train', 1)])
    with pytest.raises(AssertionError):  # mmcv: assert isinstance(hook, Hook)
        make_runner().register_hook(object())
    with pytest.raises(FileNotFoundError):  # mmcv: FileNotFoundError
        load_checkpoint(toy_model, str(tmp_path / 'missing.pth'))
    path = make_runner(toy_model).save_checkpoint(str(tmp_path))
    with pytest.raises(AssertionError):  # mmcv: assert state_dict, '... not in the model'
        load_checkpoint_with_prefix('backbone', path)
    with pytest.raises(CheckpointError):
        load_checkpoint_with_prefix('backbone', path)
