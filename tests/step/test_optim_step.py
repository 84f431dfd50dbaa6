"""The step object: exact resume inside an accumulation window, one skip rule, its state."""

import pytest
import torch

from mtrain.datasets import build_dataloader
from mtrain.hooks import (CheckpointHook, GradientCumulativeFp16OptimizerHook,
                          GradientCumulativeOptimizerHook, NanGuardHook)
from mtrain.processors import BasicBatchProcessor, MultiBatchProcessor
from mtrain.step import OptimStep


def _hook(fp16):
    if fp16:
        return GradientCumulativeFp16OptimizerHook(cumulative_iters=3, loss_scale='dynamic')
    return GradientCumulativeOptimizerHook(cumulative_iters=3)


def _state(runner):
    weights = {k: v.clone() for k, v in runner.model_wrapper.module.state_dict().items()}
    momenta = [runner.optimizer.state[p].get('momentum_buffer')
               for g in runner.optimizer.param_groups for p in g['params']]
    return weights, momenta


def _assert_same(a, b):
    for k, v in a[0].items():
        assert torch.equal(v, b[0][k]), k
    for x, y in zip(a[1], b[1]):
        assert (x is None and y is None) or torch.equal(x, y)


@pytest.mark.parametrize('processor', [BasicBatchProcessor, MultiBatchProcessor])
@pytest.mark.parametrize('fp16', [False, True])
def test_resume_inside_an_accumulation_window_is_bitwise_exact(make_runner, toy_loader,
                                                               tmp_path, processor, fp16):
    full = make_runner(by_epoch=False, max_len=11, momentum=0.9, batch_processor=processor())
    full.register_hook(_hook(fp16))
    full.register_hook(CheckpointHook(interval=4, by_epoch=False))  # 4 and 8: inside windows
    full.run([toy_loader], [('train', 1)])
    ckpt = torch.load(tmp_path / 'iter_4.pth', weights_only=True)
    assert set(ckpt['hooks'][type(full.optimizer_hook).__name__]['grads']) == {
        'fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias'}
    for name in ('iter_4.pth', 'iter_8.pth'):
        resumed = make_runner(by_epoch=False, max_len=11, momentum=0.9,
                              batch_processor=processor())
        resumed.register_hook(_hook(fp16))
        resumed.resume(str(tmp_path / name))
        resumed.run([toy_loader], [('train', 1)])
        assert resumed.num_updates == full.num_updates == 4
        _assert_same(_state(full), _state(resumed))


def _loader_with_a_nan_at_iteration(dataset, i):
    dataset.x[i * 8] = float('nan')  # batch i (8 samples a batch, no shuffle) has a NaN loss
    return build_dataloader(dataset, samples_per_gpu=8, workers_per_gpu=0, shuffle=False)


def test_a_nan_inside_a_window_drops_the_whole_window_with_either_processor(make_runner,
                                                                           toy_dataset,
                                                                           toy_model):
    loader = _loader_with_a_nan_at_iteration(toy_dataset, 4)  # window [3, 4, 5]
    results = []
    for processor in (BasicBatchProcessor(), MultiBatchProcessor()):
        runner = make_runner(by_epoch=False, max_len=8, momentum=0.9, batch_processor=processor)
        runner.register_hook(GradientCumulativeOptimizerHook(cumulative_iters=3))
        runner.register_hook(NanGuardHook(action='skip'))
        runner.run([loader], [('train', 1)])
        assert runner.num_updates == 2 and runner.optim_step.skipped_nonfinite == 1
        assert all(torch.isfinite(p).all() for p in runner.model.parameters())
        results.append(_state(runner))
    _assert_same(*results)
    # The update after the dropped window holds iterations 6 and 7 only: replaying
    # windows [0, 1, 2] and [6, 7] by hand gives the same weights.
    model = type(toy_model)()  # the same initial weights (seeded)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    batches = list(loader)
    for window, divisor in (([0, 1, 2], 3), ([6, 7], 2)):
        for i in window:
            out = model(**batches[i])
            ((out['loss_cls']) / divisor).backward()
        opt.step()
        opt.zero_grad()
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, results[0][0][k], rtol=0, atol=1e-6)


def test_state_round_trip_restores_grads_scale_and_counts():
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = OptimStep(cumulative_iters=4, amp_dtype='float16', loss_scale=dict(init_scale=64.))
    step.setup(opt, torch.device('cpu'), run_end=lambda: 8, model=model)
    step.skipped_overflow = 2
    step.backward(model(torch.ones(5, 3)).sum(), iteration=0)
    state = step.state_dict()
    assert state['scaler']['scale'] == 64. and state['skipped_steps'] == 2
    assert set(state['grads']) == {'weight', 'bias'}

    other_model = torch.nn.Linear(3, 2)
    other = OptimStep(cumulative_iters=4, amp_dtype='float16', loss_scale=dict(init_scale=8.))
    other.load_state_dict(state)  # before setup, as a resume does: applied in setup
    other.setup(torch.optim.SGD(other_model.parameters(), lr=0.1), torch.device('cpu'),
                run_end=lambda: 8, model=other_model)
    assert other.scaler.get_scale() == 64. and other.skipped_overflow == 2
    assert torch.equal(other_model.weight.grad, model.weight.grad)
    assert other.window_in_progress


def test_window_arithmetic_follows_mmcv():
    step = OptimStep(cumulative_iters=3)
    step.run_end = lambda: 8  # windows [0-2], [3-5], [6-7]: the last is short
    assert [step.ends_window(i) for i in range(8)] == [0, 0, 1, 0, 0, 1, 0, 1]
    assert [step.loss_divisor(i) for i in range(8)] == [3, 3, 3, 3, 3, 3, 2, 2]


@pytest.mark.parametrize('length', ['4', 0, True])
def test_a_bad_cumulative_iters_is_mmcvs_assertion_and_a_sentence(length):
    """mmcv 1.7.2 asserts a positive int: 1.x code catching AssertionError still catches it."""
    from mtrain.step.window import AccumulationWindow
    with pytest.raises(AssertionError, match='cumulative_iters must be a positive integer'):
        AccumulationWindow(length)
