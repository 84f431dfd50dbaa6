"""LR/momentum hooks re-read what a user may change: param groups, run length, base values.

Issue 22 items 3 and 9: a rollback (``optimizer.load_state_dict``) replaces the
param-group dicts; a schedule must follow a change of run length, of
``base_lr``, of a policy setting, of a param group's count, and a patched
policy method. The reference for "follows" is the same policy as a user's
subclass. Issue 33: nothing is cached between iterations (the computed-ahead
rows, keyed on hand-kept lists, were removed), so whatever a policy reads is
read when its value is due.
"""

import math

import numpy as np
import pytest
import torch
from schedule_driver import make_optimizer, make_runner

from mtrain.hooks import Hook, OptimizerHook
from mtrain.hooks.lr_updater import CosineAnnealingLrUpdaterHook, StepLrUpdaterHook
from mtrain.hooks.momentum_updater import CosineAnnealingMomentumUpdaterHook


def _cosine(it, total, base=0.1):
    return 0.5 * base * (1 + math.cos(math.pi * it / total))


class _Rollback(Hook):
    """Saves the optimizer's state after iteration 0 and loads it back after iteration 3."""

    priority = 'LOWEST'

    def __init__(self):
        self.saved = None
        self.rows = []

    def before_train_iter(self, runner):
        group = runner.optimizer.param_groups[0]
        self.rows.append((runner.iter, group['lr'], group['momentum']))

    def after_train_iter(self, runner):
        if runner.iter == 0:
            self.saved = runner.optimizer.state_dict()
        if runner.iter == 3:
            runner.optimizer.load_state_dict(self.saved)  # new param-group dicts


@pytest.mark.parametrize('by_epoch', [True, False], ids=['EpochBasedRunner', 'IterBasedRunner'])
def test_schedules_keep_writing_after_an_optimizer_rollback(make_runner, toy_loader, by_epoch):
    """Before: the hooks kept writing into the replaced group dicts; lr froze at the loaded value."""
    runner = make_runner(by_epoch=by_epoch, max_len=1 if by_epoch else 8, momentum=0.9)
    runner.register_hook(OptimizerHook())
    runner.register_hook(CosineAnnealingLrUpdaterHook(min_lr=0., by_epoch=False))
    runner.register_hook(CosineAnnealingMomentumUpdaterHook(min_momentum=0.5, by_epoch=False))
    rollback = _Rollback()
    runner.register_hook(rollback)
    runner.run([toy_loader], [('train', 1)])
    assert [it for it, _, _ in rollback.rows] == list(range(8))
    assert [lr for _, lr, _ in rollback.rows] == pytest.approx([_cosine(i, 8) for i in range(8)])
    momenta = [0.5 + 0.5 * (0.9 - 0.5) * (1 + math.cos(math.pi * i / 8)) for i in range(8)]
    assert [m for _, _, m in rollback.rows] == pytest.approx(momenta)


# -- a schedule follows changes mid-run ---------------------------------------------------------
class _UserStep(StepLrUpdaterHook):
    """The same policy as a user's subclass: asked every iteration (the reference)."""


class _UserCosine(CosineAnnealingLrUpdaterHook):
    pass


def _drive(hook, change, iters=40, max_iters=40):
    """Drive ``hook`` by iteration; ``change(hook, runner)`` runs before iteration 10."""
    runner = make_runner(make_optimizer(), None, 7, max_iters)
    hook.before_run(runner)
    rows = []
    while runner.iter < iters:
        if runner.iter == 10:
            change(hook, runner)
        hook.before_train_iter(runner)
        rows.append([g['lr'] for g in runner.optimizer.param_groups])
        runner.iter += 1
    return rows


def _add_group(hook, runner):
    runner.optimizer.add_param_group(dict(params=[torch.nn.Parameter(torch.zeros(1))], lr=0.5))


def _add_group_and_schedule_it(hook, runner):
    _add_group(hook, runner)
    hook.base_lr.append(0.5)  # mmcv's way: base_lr is the hook's own list


def _longer_run(hook, runner):
    runner.max_iters = 80


def _base_lr_in_place(hook, runner):
    hook.base_lr[0] = 0.2


def _base_lr_assigned(hook, runner):
    hook.base_lr = [0.3, 0.03]


def _gamma(hook, runner):
    hook.gamma = 0.5


def _steps_in_place(hook, runner):
    hook.step.append(12)


CHANGES = [_longer_run, _base_lr_in_place, _base_lr_assigned, _gamma, _steps_in_place,
           _add_group, _add_group_and_schedule_it]


@pytest.mark.parametrize('change', CHANGES, ids=[c.__name__.strip('_') for c in CHANGES])
def test_a_schedule_follows_a_change_mid_run(change):
    """Issue 22: the rows computed ahead at iteration 0 were written on, whatever changed."""
    def make(cls):
        return cls(step=[5, 20, 30], gamma=0.1, by_epoch=False, warmup='linear',
                   warmup_iters=12, warmup_ratio=0.1)

    builtin = _drive(make(StepLrUpdaterHook), change, iters=60)
    asked = _drive(make(_UserStep), change, iters=60)
    assert builtin == asked  # exact
    assert builtin[9] != builtin[11] or change is _add_group


def test_a_schedule_follows_a_longer_run_exactly():
    hook = CosineAnnealingLrUpdaterHook(min_lr=0., by_epoch=False)
    rows = _drive(hook, _longer_run, iters=30, max_iters=40)
    assert [r[0] for r in rows[10:]] == pytest.approx([_cosine(i, 80) for i in range(10, 30)],
                                                      rel=1e-12)


def test_a_param_group_added_mid_run_is_scheduled_once_base_lr_has_it():
    rows = _drive(CosineAnnealingLrUpdaterHook(min_lr=0., by_epoch=False),
                  _add_group_and_schedule_it)
    assert [r[2] for r in rows[10:]] == pytest.approx([_cosine(i, 40, 0.5) for i in range(10, 40)])
    rows = _drive(CosineAnnealingLrUpdaterHook(min_lr=0., by_epoch=False), _add_group)
    assert all(r[2] == 0.5 for r in rows[10:])  # as mmcv: not in base_lr, left alone


def test_a_policy_method_patched_on_the_class_is_called(monkeypatch):
    """Before: the class's module decided; a patched get_lr on mtrain's class was never asked."""
    calls = []
    original = CosineAnnealingLrUpdaterHook.get_lr

    def get_lr(self, runner, base_lr):
        calls.append(runner.iter)
        return original(self, runner, base_lr) * 2

    hook = CosineAnnealingLrUpdaterHook(min_lr=0., by_epoch=False)
    runner = make_runner(make_optimizer(), None, 7, 40)
    hook.before_run(runner)
    hook.before_train_iter(runner)  # rows computed with the original
    monkeypatch.setattr(CosineAnnealingLrUpdaterHook, 'get_lr', get_lr)
    runner.iter = 1
    hook.before_train_iter(runner)
    assert calls == [1, 1]  # the real runner, this iteration, once per group
    assert runner.optimizer.param_groups[0]['lr'] == pytest.approx(2 * _cosine(1, 40))


def test_a_policy_method_patched_on_the_instance_is_called():
    hook = CosineAnnealingLrUpdaterHook(min_lr=0., by_epoch=False)
    runner = make_runner(make_optimizer(), None, 7, 40)
    hook.before_run(runner)
    hook.before_train_iter(runner)
    hook.get_lr = lambda runner, base_lr: 0.123
    runner.iter = 1
    hook.before_train_iter(runner)
    assert [g['lr'] for g in runner.optimizer.param_groups] == [0.123, 0.123]


@pytest.mark.parametrize('where', ['class', 'instance'])
def test_a_writer_patched_mid_run_is_called(monkeypatch, where):
    """A row skips ``_set``/``_set_lr`` only while both are mtrain's: a patched one is called."""
    calls = []
    hook = CosineAnnealingLrUpdaterHook(min_lr=0., by_epoch=False)
    runner = make_runner(make_optimizer(), None, 7, 40)
    hook.before_run(runner)
    hook.before_train_iter(runner)  # rows computed, written through _set_from

    def _set_lr(*args):
        calls.append(runner.iter)
        for group in runner.optimizer.param_groups:
            group['lr'] = 0.5

    if where == 'class':
        monkeypatch.setattr(CosineAnnealingLrUpdaterHook, '_set_lr', lambda self, r, v: _set_lr())
    else:
        hook._set_lr = lambda r, v: _set_lr()
    runner.iter = 1
    hook.before_train_iter(runner)
    assert calls == [1]
    assert [g['lr'] for g in runner.optimizer.param_groups] == [0.5, 0.5]


@pytest.mark.parametrize('name', ['_get_regular', 'get_regular_lr', '_regular_from'])
def test_the_chain_the_rows_skip_is_called_once_patched_mid_run(monkeypatch, name):
    """The rows call get_lr directly while this chain is mtrain's; patch one link and it runs."""
    hook = CosineAnnealingLrUpdaterHook(min_lr=0., by_epoch=False)
    runner = make_runner(make_optimizer(), None, 7, 40)
    hook.before_run(runner)
    hook.before_train_iter(runner)
    original = getattr(CosineAnnealingLrUpdaterHook, name)

    def halved(self, *args):
        values = original(self, *args)
        return values if name == '_regular_from' and args[1] != self.get_lr \
            else [v / 2 for v in values]

    monkeypatch.setattr(CosineAnnealingLrUpdaterHook, name, halved)
    runner.iter = 5
    hook.before_train_iter(runner)
    assert [g['lr'] for g in runner.optimizer.param_groups] == pytest.approx(
        [_cosine(5, 40) / 2, _cosine(5, 40, 0.01) / 2])


def test_a_policy_reading_a_new_attribute_follows_its_change_mid_run():
    # A 1.x policy subclass with an attribute of its own, read at every iteration.
    class ScaledCosine(CosineAnnealingLrUpdaterHook):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.scale = 1.0

        def get_lr(self, runner, base_lr):
            return super().get_lr(runner, base_lr) * self.scale

    def halve(hook, runner):
        hook.scale = 0.5

    rows = _drive(ScaledCosine(min_lr=0., by_epoch=False), halve)
    assert [r[0] for r in rows] == pytest.approx(
        [_cosine(i, 40) * (1 if i < 10 else 0.5) for i in range(40)], rel=1e-12)


def test_an_in_place_change_of_any_attribute_is_followed():
    """Before: the rows were keyed on copies of the list/dict attributes only; a numpy
    ``base_lr`` changed in place kept the rows computed before the change."""
    def change(hook, runner):
        if runner.iter == 10:
            hook.base_lr = np.array([0.1, 0.01])
        elif runner.iter == 20:
            hook.base_lr[0] = 0.2

    hook = CosineAnnealingLrUpdaterHook(min_lr=0., by_epoch=False)
    runner = make_runner(make_optimizer(), None, 7, 40)
    hook.before_run(runner)
    rows = []
    for it in range(30):
        runner.iter = it
        change(hook, runner)
        hook.before_train_iter(runner)
        rows.append(float(runner.optimizer.param_groups[0]['lr']))
    assert rows[20:] == pytest.approx([_cosine(i, 40, 0.2) for i in range(20, 30)], rel=1e-12)


def test_a_momentum_schedule_follows_an_in_place_change_of_its_base_values():
    class _UserMomentum(CosineAnnealingMomentumUpdaterHook):
        pass

    def change(hook, runner):
        hook.base_momentum[0] = 0.5

    def drive(hook):
        runner = make_runner(make_optimizer(), None, 7, 40)
        hook.before_run(runner)
        rows = []
        for it in range(30):
            runner.iter = it
            if it == 10:
                change(hook, runner)
            hook.before_train_iter(runner)
            rows.append([g['momentum'] for g in runner.optimizer.param_groups])
        return rows

    builtin = drive(CosineAnnealingMomentumUpdaterHook(min_momentum=0.1, by_epoch=False))
    assert builtin == drive(_UserMomentum(min_momentum=0.1, by_epoch=False))
    assert builtin[9][0] != builtin[10][0]
