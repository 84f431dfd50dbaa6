"""OptimizerHook and GradientCumulativeOptimizerHook: numbers, not just "it runs"."""

import copy

import pytest
import torch

from mtrain.datasets import build_dataloader
from mtrain.hooks import GradientCumulativeOptimizerHook, Hook, OptimizerHook


def _params(runner):
    return [p.detach().clone() for p in runner.model_wrapper.module.parameters()]


def test_accumulation_over_k_iterations_equals_one_k_times_larger_batch(make_runner, toy_dataset):
    small = build_dataloader(toy_dataset, samples_per_gpu=8, workers_per_gpu=0, seed=3)
    large = build_dataloader(toy_dataset, samples_per_gpu=32, workers_per_gpu=0, seed=3)
    acc = make_runner(by_epoch=False, max_len=8, lr=0.2)
    acc.register_hook(GradientCumulativeOptimizerHook(cumulative_iters=4))
    acc.run([small], [('train', 1)])
    big = make_runner(by_epoch=False, max_len=2, lr=0.2)
    big.register_hook(OptimizerHook())
    big.run([large], [('train', 1)])
    assert acc.num_updates == big.num_updates == 2
    for a, b in zip(_params(acc), _params(big)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


def test_last_short_window_divides_by_its_own_length(make_runner, toy_loader):
    factors, steps = [], []

    class Spy(Hook):
        priority = 'HIGHEST'

        def after_train_iter(self, runner):
            factors.append(runner.optimizer_hook.loss_factor(runner))
            steps.append(runner.optimizer_hook.will_step(runner))

    runner = make_runner(by_epoch=False, max_len=10)
    runner.register_hook(GradientCumulativeOptimizerHook(cumulative_iters=4))
    runner.register_hook(Spy())
    runner.run([toy_loader], [('train', 1)])
    assert factors == [4] * 8 + [2, 2]
    assert steps == [False, False, False, True] * 2 + [False, True]
    assert runner.num_updates == 3 == runner.max_updates


def test_accumulation_windows_cross_epoch_boundaries(make_runner, toy_loader):
    # 8 batches per epoch, windows of 3: updates after global iters 3, 6, 9, 12, 15, 16.
    runner = make_runner(by_epoch=True, max_len=2)
    runner.register_hook(GradientCumulativeOptimizerHook(cumulative_iters=3))
    seen = []

    class Spy(Hook):
        def after_train_iter(self, runner):
            seen.append(runner.num_updates)

    runner.register_hook(Spy(), 'LOWEST')
    runner.run([toy_loader], [('train', 1)])
    assert seen == [0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 6]


def test_grad_clip_logs_the_norm_before_clipping_and_clips(make_runner, toy_loader):
    runner = make_runner(by_epoch=False, max_len=1, lr=0.0)
    reference = copy.deepcopy(runner.model_wrapper.module)
    runner.register_hook(OptimizerHook(grad_clip=dict(max_norm=0.01)))
    clipped = []

    class GradSpy(Hook):
        priority = 'HIGHEST'

        def after_train_iter(self, runner):
            clipped.append(None)

    runner.register_hook(GradSpy())
    batch = next(iter(toy_loader))
    runner.run([toy_loader], [('train', 1)])
    reference.train()
    reference(**batch)['loss_cls'].backward()
    expected = torch.norm(torch.stack([p.grad.norm() for p in reference.parameters()]))
    runner.log_buffer.average()
    assert runner.log_buffer.output['grad_norm'] == pytest.approx(expected.item(), rel=1e-5)
    assert expected.item() > 0.01


def test_clipped_update_has_the_clipped_norm(make_runner, toy_loader):
    runner = make_runner(by_epoch=False, max_len=1, lr=1.0)
    before = _params(runner)
    runner.register_hook(OptimizerHook(grad_clip=dict(max_norm=0.05)))
    runner.run([toy_loader], [('train', 1)])
    delta = torch.cat([(a - b).flatten() for a, b in zip(_params(runner), before)])
    assert delta.norm().item() == pytest.approx(0.05, rel=1e-4)  # lr=1: update = -clipped grad


def test_bad_arguments_are_clear_errors():
    with pytest.raises(TypeError, match='grad_clip'):
        OptimizerHook(grad_clip=35)
    with pytest.raises(ValueError, match='cumulative_iters'):
        GradientCumulativeOptimizerHook(cumulative_iters=0)


def test_detect_anomalous_params_names_unused_parameters(make_runner, toy_loader, caplog):
    runner = make_runner(by_epoch=False, max_len=1)
    runner.model_wrapper.module.unused = torch.nn.Linear(2, 2)
    runner.register_hook(OptimizerHook(detect_anomalous_params=True))
    runner.logger.propagate = True
    with caplog.at_level('ERROR'):
        runner.run([toy_loader], [('train', 1)])
    text = caplog.text
    assert 'unused.weight with shape (2, 2)' in text and 'fc1.weight' not in text
