"""1.x-era optimizer hook subclasses, written the way that era's codebases wrote them.

Their distributed optimizer hooks set their own attributes and never call
``OptimizerHook.__init__``; others override ``after_train_iter`` and do the
backward and the step themselves. Both must train as on mmcv 1.7.2.
"""

import copy

import torch
from torch import nn
from torch.nn.utils import clip_grad

from mtrain.hooks import EMAHook, GradientCumulativeOptimizerHook, Hook, OptimizerHook
from mtrain.hooks.fp16 import Fp16OptimizerHook


class DistOptimizerHook(OptimizerHook):
    """An mmdet-1.x-style hook: sets what it needs, no base __init__."""

    def __init__(self, grad_clip=None, coalesce=True, bucket_size_mb=-1):
        self.grad_clip = grad_clip
        self.coalesce = coalesce
        self.bucket_size_mb = bucket_size_mb


class OwnStepHook(OptimizerHook):
    """Does the whole step itself, as mmcv 1.7.2's OptimizerHook.after_train_iter reads."""

    def __init__(self, grad_clip=None):
        self.grad_clip = grad_clip
        self.norms = []

    def after_train_iter(self, runner):
        runner.optimizer.zero_grad()
        runner.outputs['loss'].backward()
        if self.grad_clip is not None:
            params = [p for p in runner.model.parameters()
                      if p.requires_grad and p.grad is not None]
            norm = clip_grad.clip_grad_norm_(params, **self.grad_clip)
            self.norms.append(float(norm))
            runner.log_buffer.update({'grad_norm': float(norm)}, runner.outputs['num_samples'])
        runner.optimizer.step()


class _Updates(Hook):
    priority = 'LOWEST'

    def __init__(self):
        self.seen = []

    def after_train_iter(self, runner):
        self.seen.append(runner.num_updates)


def _run(make_runner, loader, hook, *extra, iters=6):
    runner = make_runner(by_epoch=False, max_len=iters, lr=0.5)
    updates = _Updates()
    for h in (hook, updates, *extra):
        runner.register_hook(h)
    runner.run([loader], [('train', 1)])
    return runner, updates.seen


def _weights(runner):
    return [p.detach().clone() for p in runner.model_wrapper.module.parameters()]


def test_subclass_without_base_init_trains_as_optimizer_hook(make_runner, toy_loader):
    ours, seen = _run(make_runner, toy_loader, DistOptimizerHook(grad_clip=dict(max_norm=0.1)))
    base, _ = _run(make_runner, toy_loader, OptimizerHook(grad_clip=dict(max_norm=0.1)))
    assert seen == [1, 2, 3, 4, 5, 6]
    assert all(torch.equal(a, b) for a, b in zip(_weights(ours), _weights(base)))
    assert ours.optimizer_hook.grad_clip == dict(max_norm=0.1)
    assert ours.optimizer_hook.coalesce is True


def test_subclass_doing_its_own_step_trains_and_counts_its_updates(make_runner, toy_loader):
    # mmcv's loop, clip over the model's parameters; EMA follows the updates it made.
    hook = OwnStepHook(grad_clip=dict(max_norm=0.1))
    ours, seen = _run(make_runner, toy_loader, hook, EMAHook(momentum=0.5))
    base, _ = _run(make_runner, toy_loader, OptimizerHook(grad_clip=dict(max_norm=0.1)),
                   EMAHook(momentum=0.5))
    assert seen == [1, 2, 3, 4, 5, 6] and ours.num_updates == 6
    assert len(hook.norms) == 6
    assert all(torch.equal(a, b) for a, b in zip(_weights(ours), _weights(base)))
    ema = [h for h in ours.hooks if isinstance(h, EMAHook)][0]
    ema_base = [h for h in base.hooks if isinstance(h, EMAHook)][0]
    assert all(torch.equal(ema.ema[n], ema_base.ema[n]) for n in ema_base.ema)


def test_own_step_subclass_calling_super_counts_each_update_once(make_runner, toy_loader):
    class Wrapped(OptimizerHook):
        def after_train_iter(self, runner):
            self.calls = getattr(self, 'calls', 0) + 1
            super().after_train_iter(runner)

    runner, seen = _run(make_runner, toy_loader, Wrapped())
    assert seen == [1, 2, 3, 4, 5, 6] and runner.optimizer_hook.calls == 6


def test_fp16_subclass_without_base_init_gets_mmcvs_static_scale():
    class MyFp16(Fp16OptimizerHook):
        def __init__(self, grad_clip=None):
            self.grad_clip = grad_clip

    hook = MyFp16(grad_clip=dict(max_norm=1))
    assert hook.optim_step.amp_dtype == torch.float16 and hook.grad_clip == dict(max_norm=1)


def test_has_batch_norm_as_mmcv():
    hook = GradientCumulativeOptimizerHook(cumulative_iters=2)
    assert hook.has_batch_norm(nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.BatchNorm1d(2))))
    assert not hook.has_batch_norm(nn.Sequential(nn.Linear(2, 2), nn.LayerNorm(2)))
    assert hook.cumulative_iters == 2
