"""mmcv 1.7.2 optimizer hooks' extension points (accumulation, anomaly check) as 1.x code uses them.

``_init(runner)`` (sets ``divisible_iters``, ``remainder_iters``, ``initialized``) and
``_get_loss_factor(runner)``: the factors are mmcv's own test's; an override of the
factor is what the step divides by; a subclass that copies mmcv's ``after_train_iter``
trains as the stock hook; ``detect_anomalous_parameters(loss, runner)`` is what
``detect_anomalous_params`` calls. The slow test trains the same subclasses under mmcv 1.7.2.
"""

import logging
import os
import subprocess
from types import SimpleNamespace

import pytest
import torch
from torch import nn

import mmcv_python  # tests/mmcv_python.py
from mtrain.hooks import GradientCumulativeOptimizerHook, OptimizerHook
from mtrain.runner import IterBasedRunner

from mmcv_optimizer_points import hook_classes, train_all  # tests/hooks/mmcv_optimizer_points.py

SCRIPT = os.path.join(os.path.dirname(__file__), 'mmcv_optimizer_points.py')
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _factors(runner, start=0):
    """mmcv's test: ``_init`` then ``_get_loss_factor`` at each iteration from ``start``."""
    hook = GradientCumulativeOptimizerHook(cumulative_iters=3)
    runner._iter = start
    hook._init(runner)
    factors = []
    for it in range(start, runner.max_iters):
        runner._iter = it
        factors.append(hook._get_loss_factor(runner))
    return factors, (hook.divisible_iters, hook.remainder_iters, hook.initialized)


@pytest.mark.parametrize('by_epoch,max_iters,start,expected', [
    (False, 6, 0, [3] * 6), (False, 7, 0, [3] * 6 + [1]), (False, 8, 0, [3] * 6 + [2, 2]),
    (False, 6, 3, [3] * 3), (False, 8, 3, [3] * 3 + [2, 2]), (True, 8, 0, [3] * 6 + [2, 2]),
    (True, 10, 5, [3] * 4 + [1])])
def test_init_and_loss_factor_as_mmcvs_test(make_runner, by_epoch, max_iters, start, expected):
    runner = make_runner(by_epoch=by_epoch, max_len=max_iters)
    runner._max_iters = max_iters  # (as mmcv's test: an epoch runner's before its loader)
    factors, split = _factors(runner, start)
    assert factors == expected
    assert split == (max_iters - max_iters % 3, max_iters % 3, True)


class _Summed(GradientCumulativeOptimizerHook):
    """Sums each window's losses: mmcv's backward divides by what this returns."""

    def _get_loss_factor(self, runner):
        self.asked = getattr(self, 'asked', []) + [runner.iter]
        return 1


def _train(make_runner, loader, hook, lr, iters=4, model=None):
    runner = make_runner(model, by_epoch=False, max_len=iters, lr=lr)
    runner.register_hook(hook)
    runner.run([loader], [('train', 1)])
    return [p.detach() for p in runner.model_wrapper.module.parameters()]


def test_overridden_loss_factor_is_what_the_step_divides_by(make_runner, toy_loader):
    # Summing 2 losses at lr 0.05 is averaging them at lr 0.1 (SGD, no momentum).
    hook = _Summed(cumulative_iters=2)
    summed = _train(make_runner, toy_loader, hook, lr=0.05)
    averaged = _train(make_runner, toy_loader, GradientCumulativeOptimizerHook(cumulative_iters=2),
                      lr=0.1)
    assert hook.asked == [0, 1, 2, 3]
    for a, b in zip(summed, averaged):
        torch.testing.assert_close(a, b)


def test_overridden_loss_factor_is_asked_without_accumulation(make_runner, toy_loader):
    class Halved(OptimizerHook):  # mmcv divides by the factor whatever cumulative_iters is
        def _get_loss_factor(self, runner):
            return 2

    halved = _train(make_runner, toy_loader, Halved(), lr=0.2)
    plain = _train(make_runner, toy_loader, OptimizerHook(), lr=0.1)
    for a, b in zip(halved, plain):
        torch.testing.assert_close(a, b)


def test_detect_anomalous_parameters_is_the_point_called(make_runner, toy_loader, toy_model,
                                                        caplog):
    class Recording(OptimizerHook):
        def detect_anomalous_parameters(self, loss, runner):
            self.seen = getattr(self, 'seen', []) + [runner.iter]
            super().detect_anomalous_parameters(loss, runner)

    toy_model.unused = nn.Linear(2, 2)
    hook = Recording(detect_anomalous_params=True)
    with caplog.at_level(logging.ERROR):
        _train(make_runner, toy_loader, hook, lr=0.1, iters=2, model=toy_model)
    assert hook.seen == [0, 1]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert [e.split(' is not')[0] for e in errors] == \
        ['unused.weight with shape (2, 2)', 'unused.bias with shape (2,)'] * 2


MTRAIN = SimpleNamespace(OptimizerHook=OptimizerHook, IterBasedRunner=IterBasedRunner,
                         GradientCumulativeOptimizerHook=GradientCumulativeOptimizerHook)


def test_subclass_copying_mmcvs_loop_trains_as_the_hook(make_runner, toy_loader):
    hook = hook_classes(MTRAIN)['own_loop']()  # mmcv's after_train_iter, copied
    hook.asked = []
    ours = _train(make_runner, toy_loader, hook, lr=0.1, iters=5)
    stock = _train(make_runner, toy_loader, GradientCumulativeOptimizerHook(
        cumulative_iters=3, grad_clip=dict(max_norm=2.)), lr=0.1, iters=5)
    assert (hook.divisible_iters, hook.remainder_iters, len(hook.asked)) == (3, 2, 2)
    for a, b in zip(ours, stock):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.slow
def test_subclasses_train_as_on_mmcv_1_7_2(tmp_path):
    probe = 'from importlib.metadata import version as v; print(v("mmcv"), v("torch"))'
    python = mmcv_python.find(probe, ['1.7.2', torch.__version__], 'mmcv 1.7.2 and this torch')
    out = tmp_path / 'mmcv.pt'
    done = subprocess.run([python, SCRIPT, 'mmcv', str(out)], capture_output=True, text=True,
                          env=dict(os.environ, CUDA_VISIBLE_DEVICES=''), timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = torch.load(out)
    ours = train_all(MTRAIN)
    assert ours.keys() == theirs.keys()
    for name, want in theirs.items():
        got = ours[name]
        assert (got['asked'], got['divisible'], got['remainder']) == \
            (want['asked'], want['divisible'], want['remainder']), name
        assert torch.equal(got['weight'], want['weight']) and torch.equal(got['bias'],
                                                                          want['bias']), name
