"""nan_policy='skip' with a fused optimizer: the skip happens on the device, nothing is read back.

The fused optimizers (``fused=True``) take the verdict as ``found_inf``, as
GradScaler hands it theirs; the reference for "skipped exactly" is the same
fused optimizer with the host-read skip (``_step_supports_amp_scaling``
switched off on the instance: OptimStep then reads the verdict and does not
call ``step()``), so both runs use the same kernels on the same batches.
"""

import itertools
import logging
import math

import pytest
import torch
from torch.overrides import TorchFunctionMode

from mtrain.datasets import build_dataloader
from mtrain.hooks import (CheckpointHook, Fp16OptimizerHook, GradientCumulativeOptimizerHook,
                          Hook, NanGuardHook, OptimizerHook)
from mtrain.runner import IterBasedRunner
from mtrain.step import OptimStep

BAD_BATCHES = (0, 4, 5)  # of the 8 per pass: the first update is a skip, then two in a row


pytestmark = pytest.mark.usefixtures('cpu_fused')  # (tests/conftest.py)


class HostRead(AssertionError):
    pass


class NoHostReads(TorchFunctionMode):
    """Raise on each torch call that brings a tensor's value to the host (a sync on a GPU)."""

    READS = {'item', 'tolist', 'numpy', 'cpu', '__bool__', '__int__', '__float__', '__index__',
             '__complex__', 'equal', 'allclose', 'is_nonzero'}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, '__name__', None) in self.READS:
            raise HostRead(f'{func.__name__} read a tensor back')
        return func(*args, **(kwargs or {}))


def _optimizer(kind, params):
    if kind == 'sgd':
        return torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=1e-3, fused=True)
    return torch.optim.AdamW(params, lr=0.01, weight_decay=0.01, fused=True)


def _poisoned_loader(dataset, bad=BAD_BATCHES):
    for i in bad:
        dataset.x[i * 8] = float('nan')  # 8 samples a batch, no shuffle: batch i's loss is NaN
    return build_dataloader(dataset, samples_per_gpu=8, workers_per_gpu=0, shuffle=False)


def _train(model, loader, kind, tmp_path, logger, device_skip=True, max_iters=16,
           cumulative_iters=1, hooks=(), resume=None):
    optimizer = _optimizer(kind, model.parameters())
    if not device_skip:  # the same fused kernels; OptimStep reads the verdict instead
        optimizer._step_supports_amp_scaling = False
    runner = IterBasedRunner(model, optimizer=optimizer, work_dir=str(tmp_path), logger=logger,
                             max_iters=max_iters)
    runner.register_hook(GradientCumulativeOptimizerHook(cumulative_iters=cumulative_iters))
    runner.register_hook(NanGuardHook(action='skip'))
    for hook in hooks:
        runner.register_hook(hook)
    if resume:
        runner.resume(resume)
    runner.run([loader], [('train', 1)])
    return runner


def _state(runner):
    optimizer = runner.optimizer
    weights = {k: v.clone() for k, v in runner.model_wrapper.module.state_dict().items()}
    slots = {(i, k): v.clone() for i, p in enumerate(optimizer.param_groups[0]['params'])
             for k, v in optimizer.state[p].items()}
    return weights, slots


def _assert_bitwise_equal(a, b):
    for ours, theirs in zip(a, b):
        assert ours.keys() == theirs.keys()
        for key, value in ours.items():
            assert torch.equal(value, theirs[key]), key


@pytest.mark.parametrize('cumulative_iters', [1, 2])
@pytest.mark.parametrize('kind', ['sgd', 'adamw'])
def test_device_skip_is_bitwise_the_host_skip(toy_dataset, toy_model, tmp_path, logger, caplog,
                                              kind, cumulative_iters):
    loader = _poisoned_loader(toy_dataset)
    runs = []
    for device_skip in (True, False):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=logger.name):
            runner = _train(type(toy_model)(), loader, kind, tmp_path, logger, device_skip,
                            cumulative_iters=cumulative_iters)
        settled = [r.message for r in caplog.records if 'since the last log line' in r.message]
        assert bool(settled) == device_skip  # (the run without a logger settles at its end)
        runs.append(runner)
    device, host = runs
    windows = 16 // cumulative_iters
    skipped = {1: 6, 2: 4}[cumulative_iters]  # each pass: batches 0, 4, 5 / windows [0, 1], [4, 5]
    for runner in runs:
        assert runner.optim_step.skipped_nonfinite == skipped
        assert runner.num_updates == windows - skipped
        assert all(torch.isfinite(p).all() for p in runner.model.parameters())
    _assert_bitwise_equal(_state(device), _state(host))
    assert not torch.equal(_state(device)[0]['fc1.weight'], type(toy_model)().fc1.weight)


def _one_update(model, step, batch, iteration, poisoned):
    loss = model(**batch)['loss_cls']
    if poisoned:
        loss = loss * float('nan')
    step.backward(loss, iteration)
    return step.update()


@pytest.mark.parametrize('kind', ['sgd', 'adamw'])
def test_the_device_side_skip_reads_nothing_back(toy_model, toy_loader, kind):
    step = OptimStep(grad_clip=dict(max_norm=1.0))
    step.setup(_optimizer(kind, toy_model.parameters()), torch.device('cpu'), run_end=lambda: 6,
               model=toy_model)
    step.skip_nonfinite = True
    batches = list(itertools.islice(toy_loader, 6))
    assert not _one_update(toy_model, step, batches[0], 0, False).deferred  # read: see OptimStep
    with NoHostReads():
        results = [_one_update(toy_model, step, batches[i], i, i in (2, 3)) for i in range(1, 6)]
    assert all(r.stepped and r.deferred for r in results)
    assert step.take_device_skips() == {'overflow': 0, 'nonfinite': 2}
    assert step.skipped_nonfinite == 2 and step.take_device_skips()['nonfinite'] == 0


def test_a_non_fused_optimizer_reads_the_verdict_at_each_update(toy_model, toy_loader):
    step = OptimStep()
    optimizer = torch.optim.SGD(toy_model.parameters(), lr=0.1, momentum=0.9)  # foreach
    step.setup(optimizer, torch.device('cpu'), run_end=lambda: 3, model=toy_model)
    step.skip_nonfinite = True
    batches = list(itertools.islice(toy_loader, 3))
    assert _one_update(toy_model, step, batches[0], 0, False).stepped
    with NoHostReads(), pytest.raises(HostRead, match='__bool__'):
        _one_update(toy_model, step, batches[1], 1, False)
    step.optimizer.zero_grad()  # (the interrupted update left its gradients)
    result = _one_update(toy_model, step, batches[2], 2, True)
    assert not result.stepped and result.skipped_because == 'the loss was not finite'


def test_state_round_trip_keeps_unread_skips_and_a_half_window(toy_model, toy_loader):
    step = OptimStep(cumulative_iters=2)
    step.setup(_optimizer('sgd', toy_model.parameters()), torch.device('cpu'), run_end=lambda: 8,
               model=toy_model)
    step.skip_nonfinite = True
    batches = list(itertools.islice(toy_loader, 5))
    for i in range(4):  # window [0, 1] applied (read), [2, 3] skipped on the device (unread)
        loss = toy_model(**batches[i])['loss_cls'] * (float('nan') if i == 3 else 1.0)
        step.backward(loss, i)
        if step.ends_window(i):
            step.update()
    step.backward(toy_model(**batches[4])['loss_cls'] * float('nan'), 4)  # half of [4, 5]
    state = step.state_dict()
    assert state['skipped_nonfinite'] == 1 and state['skipped_nonfinite_unread'] == 1
    assert not state['window_finite'] and set(state['grads']) == {
        'fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias'}
    assert step.take_device_skips()['nonfinite'] == 1  # (a log line: now known)
    assert 'skipped_nonfinite_unread' not in step.state_dict()

    model = type(toy_model)()
    other = OptimStep(cumulative_iters=2)
    other.load_state_dict(state)  # before setup, as a resume does
    other.setup(_optimizer('sgd', model.parameters()), torch.device('cpu'), run_end=lambda: 8,
                model=model)
    other.skip_nonfinite = True
    assert other.skipped_nonfinite == 1 and other.window_in_progress
    assert other.take_device_skips() == {'overflow': 0, 'nonfinite': 1}  # learnt after resume
    other.backward(model(**batches[0])['loss_cls'], 5)
    result = other.update()  # the loaded half window held a NaN: dropped (read: first update)
    assert not result.stepped and other.skipped_nonfinite == 2


@pytest.mark.parametrize('checkpoint', ['iter_4.pth', 'iter_8.pth'])
def test_resume_after_a_device_skip_is_exact(toy_dataset, toy_model, tmp_path, logger,
                                             checkpoint):
    # Windows [0-2] [3-5] [6-8] [9, 10]; batch 3's loss is NaN, so [3-5] is skipped: at
    # iter_4 the half window holds the NaN; at iter_8 the skip is on the device, unread.
    loader = _poisoned_loader(toy_dataset, bad=(3,))
    run = dict(kind='sgd', tmp_path=tmp_path, logger=logger, max_iters=11, cumulative_iters=3)
    full = _train(type(toy_model)(), loader, hooks=[CheckpointHook(interval=4, by_epoch=False)],
                  **run)
    resumed = _train(type(toy_model)(), loader, resume=str(tmp_path / checkpoint), **run)
    for runner in (full, resumed):
        assert runner.num_updates == 3 and runner.optim_step.skipped_nonfinite == 1
    _assert_bitwise_equal(_state(full), _state(resumed))


class InjectInf(Hook):
    """Write an inf into one gradient at the given (0-based) iterations."""

    def __init__(self, iterations):
        self.iterations = set(iterations)

    def after_backward(self, runner):
        if runner.iter in self.iterations:
            next(runner.model_wrapper.module.parameters()).grad[0, 0] = float('inf')


@pytest.mark.parametrize('inf_at', [0, 2])  # 0: the step that would create the momenta
def test_fp16_overflow_with_a_fused_optimizer_is_counted_on_the_device(toy_model, toy_loader,
                                                                        tmp_path, logger,
                                                                        caplog, inf_at):
    # GradScaler steps a fused optimizer whatever its verdict (the kernels skip), so the
    # step post-hook alone would take every step for an update. The reference: the same
    # fused kernels, but GradScaler reads the verdict and does not call step().
    runs = []
    for device_skip in (True, False):
        model = type(toy_model)()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, fused=True)
        if not device_skip:
            optimizer._step_supports_amp_scaling = False
        runner = IterBasedRunner(model, optimizer=optimizer, work_dir=str(tmp_path),
                                 logger=logger, max_iters=4)
        runner.register_hook(Fp16OptimizerHook(loss_scale='dynamic'))
        runner.register_hook(InjectInf(iterations=[inf_at]))
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=logger.name):
            runner.run([toy_loader], [('train', 1)])
        assert runner.num_updates == 3 and runner.optimizer_hook.skipped_steps == 1
        assert runner.optimizer_hook.scaler.get_scale() == 2.**15
        warned = [r.message.split(':')[0] for r in caplog.records]
        assert warned == (['1 step(s) skipped since the last log line'] if device_skip
                          else [f'inf/NaN gradients at iteration {inf_at + 1}'])
        runs.append(runner)
    _assert_bitwise_equal(_state(runs[0]), _state(runs[1]))


class Averages(Hook):
    """The log buffer's averages every ``interval`` iterations (what a log line shows)."""

    priority = 'LOWEST'

    def __init__(self, interval):
        self.interval, self.lines = interval, []

    def after_train_iter(self, runner):
        if (runner.iter + 1) % self.interval == 0:
            runner.log_buffer.average()
            self.lines.append(dict(runner.log_buffer.output))
            runner.log_buffer.clear_output()


@pytest.mark.parametrize('kind', ['sgd', 'adamw'])
def test_device_and_host_skips_log_the_same_grad_norm(toy_dataset, toy_model, tmp_path, logger,
                                                      kind):
    # Issue 22 item 8: a skip decided on the device logged grad_norm: nan for its interval,
    # the host-side skip the norm of the applied updates.
    loader = _poisoned_loader(toy_dataset)
    logged = []
    for device_skip in (True, False):
        model = type(toy_model)()
        optimizer = _optimizer(kind, model.parameters())
        if not device_skip:
            optimizer._step_supports_amp_scaling = False
        runner = IterBasedRunner(model, optimizer=optimizer, work_dir=str(tmp_path),
                                 logger=logger, max_iters=16)
        averages = Averages(4)
        for hook in (OptimizerHook(grad_clip=dict(max_norm=1.0)), NanGuardHook(action='skip'),
                     averages):
            runner.register_hook(hook)
        runner.run([loader], [('train', 1)])
        logged.append([line['grad_norm'] for line in averages.lines])
    device, host = logged
    assert len(device) == 4 and all(math.isfinite(v) for v in device), device
    assert device == pytest.approx(host, rel=1e-12)
