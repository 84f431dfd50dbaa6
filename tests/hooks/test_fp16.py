"""Fp16OptimizerHook: exact loss scaling, skipped overflow steps, state in checkpoints, bf16."""

import copy
import os.path as osp

import pytest
import torch

from mtrain.config import load_config
from mtrain.hooks import (Fp16OptimizerHook, GradientCumulativeFp16OptimizerHook, Hook,
                          TorchLrUpdaterHook)
from mtrain.hooks.fp16 import check_autocast_support
from mtrain.runner import IterBasedRunner, build_runner
from mtrain.utils import ConfigError


ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def _params(runner):
    return [p.detach().clone() for p in runner.model_wrapper.module.parameters()]


def _grads(model):
    return [p.grad.detach().clone() for p in model.parameters()]


class GradRecorder(Hook):
    """Grads right after backward (scaled) and right before the step (unscaled)."""

    def __init__(self):
        self.scaled, self.unscaled = [], []

    def after_backward(self, runner):
        self.scaled.append(_grads(runner.model_wrapper.module))

    def before_optimizer_step(self, runner):
        self.unscaled.append(_grads(runner.model_wrapper.module))


class InjectInf(Hook):
    """Write an inf into one gradient at the given (0-based) iterations."""

    def __init__(self, iterations):
        self.iterations = set(iterations)

    def after_backward(self, runner):
        if runner.iter in self.iterations:
            next(runner.model_wrapper.module.parameters()).grad[0, 0] = float('inf')


class StepRecorder(Hook):
    """Parameters, lr and update count after every iteration."""

    priority = 'LOWEST'

    def __init__(self):
        self.params, self.lrs, self.updates = [], [], []

    def before_train_iter(self, runner):
        self.lrs.append(runner.current_lr()[0])

    def after_train_iter(self, runner):
        self.params.append(_params(runner))
        self.updates.append(runner.num_updates)


def _reference_grads(model, batch, dtype, scale=1.0):
    """Grads of ``scale * loss`` for a copy of ``model`` under autocast in ``dtype``."""
    model = copy.deepcopy(model)
    model.train()
    with torch.autocast('cpu', dtype=dtype):
        loss = model(**batch)['loss_cls']
    (loss * scale).backward()
    return _grads(model)


def test_static_loss_scale_is_applied_exactly(make_runner, toy_dataset):
    batches = [{'img': toy_dataset.x[:16], 'gt_label': toy_dataset.y[:16]}]
    runner = make_runner(by_epoch=False, max_len=1, lr=0.0)
    expected_scaled = _reference_grads(runner.model_wrapper.module, batches[0], torch.float16, 512.)
    grads = GradRecorder()
    runner.register_hook(Fp16OptimizerHook(loss_scale=512.))
    runner.register_hook(grads)
    runner.run([batches], [('train', 1)])
    for got, want in zip(grads.scaled[0], expected_scaled):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    for scaled, unscaled in zip(grads.scaled[0], grads.unscaled[0]):
        torch.testing.assert_close(unscaled, scaled / 512., rtol=0, atol=0)
    assert runner.optimizer_hook.scaler.get_scale() == 512.
    assert runner.batch_processor.autocast_dtype == torch.float16


def test_inf_gradient_skips_the_step_and_the_lr_schedule(make_runner, toy_loader):
    runner = make_runner(by_epoch=False, max_len=4, lr=0.1)
    record = StepRecorder()
    runner.register_hook(TorchLrUpdaterHook(scheduler=dict(type='StepLR', step_size=1,
                                                           gamma=0.5)), 'VERY_HIGH')
    runner.register_hook(Fp16OptimizerHook(loss_scale='dynamic'))
    runner.register_hook(InjectInf(iterations=[1]))
    runner.register_hook(record)
    runner.run([toy_loader], [('train', 1)])
    assert record.updates == [1, 1, 2, 3]  # iteration 2 (index 1) was not an update
    assert runner.iter == 4 and runner.optimizer_hook.skipped_steps == 1
    for before, after in zip(record.params[0], record.params[1]):
        torch.testing.assert_close(after, before, rtol=0, atol=0)  # weights unchanged
    assert record.lrs == [0.1, 0.05, 0.05, 0.025]  # the schedule did not advance either
    assert runner.optimizer_hook.scaler.get_scale() == 2.**15  # dynamic: halved once
    runner.log_buffer.average()
    assert runner.log_buffer.output['fp16_skipped_steps'] > 0


def test_overflowing_static_scale_never_writes_inf_into_the_weights(make_runner, toy_loader):
    # 2**40 overflows float16 in the backward every step: every step must be skipped.
    runner = make_runner(by_epoch=False, max_len=3, lr=0.1)
    before = _params(runner)
    runner.register_hook(Fp16OptimizerHook(loss_scale=2.**40))
    runner.run([toy_loader], [('train', 1)])
    assert runner.num_updates == 0 and runner.optimizer_hook.skipped_steps == 3
    for a, b in zip(_params(runner), before):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert runner.optimizer_hook.scaler.get_scale() == 2.**40  # static: never changes


def test_grad_clip_under_fp16_clips_the_unscaled_norm(make_runner, toy_dataset):
    batch = {'img': toy_dataset.x[:16], 'gt_label': toy_dataset.y[:16]}
    runner = make_runner(by_epoch=False, max_len=1, lr=1.0)
    true_norm = torch.norm(torch.stack(
        [g.norm() for g in _reference_grads(runner.model_wrapper.module, batch, torch.float16)]))
    before = _params(runner)
    runner.register_hook(Fp16OptimizerHook(loss_scale=512., grad_clip=dict(max_norm=0.05)))
    runner.run([[batch]], [('train', 1)])
    runner.log_buffer.average()
    assert true_norm > 0.05
    assert runner.log_buffer.output['grad_norm'] == pytest.approx(true_norm.item(), rel=1e-3)
    delta = torch.cat([(a - b).flatten() for a, b in zip(_params(runner), before)])
    assert delta.norm().item() == pytest.approx(0.05, rel=1e-3)  # lr=1: update = clipped grad


def test_scaler_state_survives_a_checkpoint_round_trip(make_runner, toy_loader, tmp_path):
    def hook():  # the scale doubles after every 2 good steps
        return Fp16OptimizerHook(loss_scale=dict(init_scale=64., growth_interval=2))

    straight = make_runner(by_epoch=False, max_len=6)
    straight.register_hook(hook())
    straight.run([toy_loader], [('train', 1)])

    first = make_runner(by_epoch=False, max_len=3)
    first.register_hook(hook())
    first.run([toy_loader], [('train', 1)])
    path = first.save_checkpoint(str(tmp_path), filename_tmpl='iter_{}.pth')
    saved = torch.load(path, weights_only=True)['hooks']['Fp16OptimizerHook']['scaler']
    assert saved['scale'] == 128. and saved['_growth_tracker'] == 1

    resumed = make_runner(by_epoch=False, max_len=6)
    resumed.register_hook(hook())
    resumed.resume(path)
    resumed.run([toy_loader], [('train', 1)])
    assert resumed.optimizer_hook.scaler.state_dict() == straight.optimizer_hook.scaler.state_dict()
    assert straight.optimizer_hook.scaler.get_scale() == 64. * 2 ** 3
    for a, b in zip(_params(resumed), _params(straight)):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_cumulative_fp16_updates_the_scale_once_per_window(make_runner, toy_loader):
    runner = make_runner(by_epoch=False, max_len=8)
    record = StepRecorder()
    runner.register_hook(GradientCumulativeFp16OptimizerHook(
        cumulative_iters=4, loss_scale=dict(init_scale=8., growth_interval=1)))
    runner.register_hook(record)
    runner.run([toy_loader], [('train', 1)])
    assert record.updates == [0, 0, 0, 1, 1, 1, 1, 2]
    assert runner.optimizer_hook.scaler.get_scale() == 32.  # doubled per update, not per iter


def test_cumulative_fp16_skips_the_whole_window_on_an_inf(make_runner, toy_loader):
    runner = make_runner(by_epoch=False, max_len=4)
    before = _params(runner)
    runner.register_hook(GradientCumulativeFp16OptimizerHook(cumulative_iters=2))
    runner.register_hook(InjectInf(iterations=[0]))  # the first micro-step of window 1
    record = StepRecorder()
    runner.register_hook(record)
    runner.run([toy_loader], [('train', 1)])
    assert record.updates == [0, 0, 0, 1]
    for a, b in zip(record.params[1], before):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_bf16_autocasts_without_scaling(make_runner, toy_dataset):
    batch = {'img': toy_dataset.x[:16], 'gt_label': toy_dataset.y[:16]}
    runner = make_runner(by_epoch=False, max_len=1, lr=0.0)
    expected = _reference_grads(runner.model_wrapper.module, batch, torch.bfloat16)
    dtypes = []
    runner.model_wrapper.module.fc1.register_forward_hook(lambda m, i, o: dtypes.append(o.dtype))
    grads = GradRecorder()
    runner.register_hook(Fp16OptimizerHook(dtype='bfloat16'))
    runner.register_hook(grads)
    runner.run([[batch]], [('train', 1)])
    assert dtypes == [torch.bfloat16] and runner.optimizer_hook.scaler is None
    for got, want in zip(grads.unscaled[0], expected):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert runner.optimizer_hook.state_dict() == {}


def test_bf16_on_a_device_that_cannot_is_a_clear_error(monkeypatch):
    with pytest.raises(RuntimeError, match='not available on device'):
        check_autocast_support(torch.device('meta'), torch.bfloat16)
    # A GPU without bf16 (e.g. a V100); there is no GPU here, so its answers are stood in.
    monkeypatch.setattr(torch.amp, 'is_autocast_available', lambda device_type: True)
    monkeypatch.setattr(torch.cuda, 'is_bf16_supported', lambda: False)
    monkeypatch.setattr(torch.cuda, 'get_device_name', lambda device=None: 'Tesla V100')
    with pytest.raises(RuntimeError, match="Tesla V100 cannot compute in bfloat16; use fp16="):
        check_autocast_support(torch.device('cuda', 0), torch.bfloat16)


@pytest.mark.parametrize('kwargs, error, match', [
    (dict(loss_scale='auto'), TypeError, "'dynamic' or a dict"),
    (dict(loss_scale=True), TypeError, 'must be a number'),
    (dict(loss_scale=-1.), ValueError, 'positive finite'),
    (dict(loss_scale=dict(init_scale=8., scale_window=10)), ValueError, 'scale_window'),
    (dict(dtype='float8'), ValueError, "'float16' or 'bfloat16'"),
    (dict(dtype='bfloat16', loss_scale='dynamic'), ValueError, 'remove loss_scale'),
])
def test_bad_fp16_arguments_are_clear_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        Fp16OptimizerHook(**kwargs)


def _digits_cfg(**overrides):
    cfg = load_config(osp.join(ROOT, 'configs', 'digits', 'lenet_digits.py'))
    cfg.merge_from_dict(overrides)
    return cfg


@pytest.mark.parametrize('optimizer_config, fp16, expected', [
    (dict(grad_clip=None), dict(loss_scale=512.), 'Fp16OptimizerHook'),
    (dict(type='GradientCumulativeOptimizerHook', cumulative_iters=2),
     dict(loss_scale='dynamic'), 'GradientCumulativeFp16OptimizerHook'),
    (dict(grad_clip=None), dict(dtype='bfloat16'), 'Fp16OptimizerHook'),
    (dict(grad_clip=None), None, 'OptimizerHook'),
])
def test_the_fp16_key_selects_the_hook(optimizer_config, fp16, expected, tmp_path, logger):
    cfg = _digits_cfg(optimizer_config=optimizer_config, fp16=fp16)
    runner, _, _ = build_runner(cfg, str(tmp_path), logger, seed=0, validate=False)
    assert type(runner.optimizer_hook).__name__ == expected


def test_fp16_config_errors_name_the_key(tmp_path, logger):
    with pytest.raises(ConfigError, match='key `fp16`.*must be a dict'):
        build_runner(_digits_cfg(fp16=True), str(tmp_path), logger, validate=False)
    with pytest.raises(ConfigError, match='optimizer_config.loss_scal.*loss_scale'):
        build_runner(_digits_cfg(fp16=dict(loss_scal=8.)), str(tmp_path), logger, validate=False)


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')
@pytest.mark.parametrize('dtype', ['float16', 'bfloat16'])
def test_on_cuda_the_cuda_autocast_and_scaler_are_used(toy_model, toy_loader, logger, tmp_path,
                                                       dtype):
    model = toy_model.cuda()
    runner = IterBasedRunner(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                             work_dir=str(tmp_path), logger=logger, max_iters=3)
    dtypes = []
    model.fc1.register_forward_hook(lambda m, i, o: dtypes.append((o.device.type, o.dtype)))
    runner.register_hook(Fp16OptimizerHook(dtype=dtype))
    if dtype == 'float16':
        runner.register_hook(InjectInf(iterations=[1]))
    runner.run([toy_loader], [('train', 1)])
    assert dtypes == [('cuda', getattr(torch, dtype))] * 3
    assert runner.num_updates == (2 if dtype == 'float16' else 3)  # fp16: the inf step skipped
    assert all(torch.isfinite(p).all() for p in model.parameters())
