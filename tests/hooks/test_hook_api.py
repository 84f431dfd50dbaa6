"""mmcv 1.x's Hook API: the helpers' numbers, ``get_triggered_stages``, custom hooks.

Expected values follow mmcv 1.7.2's ``Hook``: ``(runner.iter + 1) % n == 0``
and alike (counters from 0; ``n <= 0`` never), ``end_of_epoch`` on the
loader's last batch, ``is_last_iter`` against ``max_iters`` (an epoch run's
is ``max_epochs * len(loader)``).
"""

import pytest

from mtrain.hooks import Hook
from mtrain.hooks.hook import MMCV_STAGES


class MmdetStyleHook(Hook):
    """A custom hook as mmdet 2.x code writes them: helpers, runner attributes."""

    def __init__(self, interval=2):
        self.interval = interval
        self.seen = []

    def before_run(self, runner):
        self.seen.append(('before_run', runner.epoch, runner.iter, type(runner.model_wrapper.module)))

    def after_train_iter(self, runner):
        if self.every_n_iters(runner, self.interval):
            self.seen.append(('every_2_iters', runner.iter + 1))
        if self.every_n_inner_iters(runner, 3):
            self.seen.append(('every_3_inner', runner.epoch + 1, runner.inner_iter + 1))
        if self.end_of_epoch(runner):
            self.seen.append(('end_of_epoch', runner.epoch + 1, runner.inner_iter + 1))
        if self.is_last_iter(runner):
            self.seen.append(('last_iter', runner.iter + 1))
        assert runner.outputs['log_vars']['loss'] is not None and runner.mode == 'train'

    def after_train_epoch(self, runner):
        if self.every_n_epochs(runner, 2):
            self.seen.append(('every_2_epochs', runner.epoch + 1))
        if self.is_last_epoch(runner):
            self.seen.append(('last_epoch', runner.epoch + 1, runner._max_epochs))
        assert not self.every_n_epochs(runner, 0) and not self.every_n_iters(runner, -1)


def test_helpers_give_mmcvs_numbers_in_a_real_run(make_runner, toy_loader, toy_model):
    runner = make_runner(toy_model, max_len=3)  # 8 iterations per epoch, 24 in all
    hook = MmdetStyleHook()
    runner.register_custom_hooks(dict(type=lambda **kw: hook, priority='LOW'))  # one, no list
    runner.run([toy_loader], [('train', 1)])
    seen = hook.seen
    assert seen[0] == ('before_run', 0, 0, type(toy_model))
    assert [s[1] for s in seen if s[0] == 'every_2_iters'] == list(range(2, 25, 2))
    assert [s[1:] for s in seen if s[0] == 'every_3_inner'] == [
        (e, i) for e in (1, 2, 3) for i in (3, 6)]
    assert [s[1:] for s in seen if s[0] == 'end_of_epoch'] == [(1, 8), (2, 8), (3, 8)]
    assert [s for s in seen if s[0] in ('last_iter', 'every_2_epochs', 'last_epoch')] == [
        ('every_2_epochs', 2), ('last_iter', 24), ('last_epoch', 3, 3)]


def test_a_single_hook_object_as_custom_hooks(make_runner):
    runner = make_runner()
    hook = MmdetStyleHook()
    runner.register_training_hooks(custom_hooks_config=hook, timer_config=None)
    assert runner.hooks == [hook] and hook.priority == 50  # its class default, NORMAL


@pytest.mark.parametrize('methods, stages', [
    (['before_run'], ['before_run']),
    (['before_epoch'], ['before_train_epoch', 'before_val_epoch']),
    (['after_iter', 'after_train_iter'], ['after_train_iter', 'after_val_iter']),
    (['after_val_epoch', 'before_run', 'after_run'], ['before_run', 'after_val_epoch',
                                                       'after_run']),
    ([], []),
])
def test_get_triggered_stages_as_mmcv(methods, stages):
    hook_cls = type('H', (Hook, ), {m: lambda self, runner: None for m in methods})
    assert hook_cls().get_triggered_stages() == stages
    assert len(Hook.stages) > len(MMCV_STAGES) == 10  # mtrain's extra stages: triggered_stages


def test_hook_info_lists_each_stage_with_priority(make_runner):
    runner = make_runner()
    runner.register_hook(MmdetStyleHook(), 'VERY_LOW')
    info = runner.get_hook_info()
    assert 'before_run:\n(VERY_LOW    ) MmdetStyleHook' in info
    assert 'after_train_epoch:\n(VERY_LOW    ) MmdetStyleHook' in info
