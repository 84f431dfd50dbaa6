"""mmcv 1.7.2 Fp16OptimizerHook's extension points, as 1.x subclasses and hooks use them.

``loss_scaler`` is the live ``GradScaler`` the step uses (a subclass that copies mmcv's
``after_train_iter`` trains as the stock hook; a hook logging ``get_scale()`` reads the
scale the step uses), ``_scale_update_param`` is mmcv's static scale, a subclass that
skips ``__init__`` may set its own scaler, and the legacy helpers
``copy_grads_to_fp32``/``copy_params_to_fp16`` copy as mmcv's. On the CPU (float16
autocast, the CPU GradScaler); mmcv 1.7.2's own hook needs CUDA for its scaler, so the
expectations are the stock hook's numbers and GradScaler's arithmetic.
"""

import torch
from torch import nn

from mtrain.hooks import Fp16OptimizerHook, GradientCumulativeFp16OptimizerHook, Hook


class GradAccumFp16(Fp16OptimizerHook):
    """mmselfsup 0.x's GradAccumFp16OptimizerHook shape: mmcv's step body, every n iters."""

    def __init__(self, update_interval=1, **kwargs):
        super().__init__(**kwargs)
        self.update_interval = update_interval
        self.scales = []

    def after_train_iter(self, runner):
        runner.outputs['loss'] /= self.update_interval
        self.loss_scaler.scale(runner.outputs['loss']).backward()
        if self.every_n_iters(runner, self.update_interval):
            self.loss_scaler.unscale_(runner.optimizer)
            if self.grad_clip is not None:
                self.clip_grads(runner.model.parameters())
            self.loss_scaler.step(runner.optimizer)
            self.loss_scaler.update(self._scale_update_param)
            runner.meta.setdefault('fp16', {})['loss_scaler'] = self.loss_scaler.state_dict()
            self.scales.append(self.loss_scaler.get_scale())
            runner.model.zero_grad()
            runner.optimizer.zero_grad()


class ScaleLogger(Hook):
    """Reads the optimizer hook's scale after each iteration, as logging hooks of that era do."""

    priority = 'LOWEST'

    def __init__(self):
        self.scales = []

    def after_train_iter(self, runner):
        optimizer_hook = [h for h in runner.hooks if isinstance(h, Fp16OptimizerHook)][0]
        self.scales.append(optimizer_hook.loss_scaler.get_scale())


def _train(make_runner, loader, *hooks, iters=6):
    runner = make_runner(by_epoch=False, max_len=iters, lr=0.1)
    for hook in hooks:
        runner.register_hook(hook)
    runner.run([loader], [('train', 1)])
    return runner, [p.detach() for p in runner.model_wrapper.module.parameters()]


def test_subclass_with_mmcvs_step_trains_as_the_stock_hook(make_runner, toy_loader):
    # 2**30 overflows float16 at first: both halve the scale and skip the same steps.
    scale = dict(init_scale=2.**30, growth_interval=2)
    ours = GradAccumFp16(loss_scale=scale, grad_clip=dict(max_norm=1.))
    runner, weights = _train(make_runner, toy_loader, ours)
    stock = ScaleLogger()
    base, base_weights = _train(make_runner, toy_loader,
                                Fp16OptimizerHook(loss_scale=scale, grad_clip=dict(max_norm=1.)),
                                stock)
    assert ours.scales == stock.scales and ours.scales[0] == 2.**29
    assert runner.num_updates == base.num_updates < 6  # the skipped steps are not counted
    assert runner.meta['fp16']['loss_scaler'] == ours.loss_scaler.state_dict()
    for a, b in zip(weights, base_weights):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


class CumulativeOwnLoop(GradientCumulativeFp16OptimizerHook):
    """mmcv 1.7.2's GradientCumulativeFp16OptimizerHook.after_train_iter, as subclasses copy it."""

    def after_train_iter(self, runner):
        if not self.initialized:
            self._init(runner)
        loss = runner.outputs['loss'] / self._get_loss_factor(runner)
        self.loss_scaler.scale(loss).backward()
        if self.every_n_iters(runner, self.cumulative_iters) or self.is_last_iter(runner):
            self.loss_scaler.unscale_(runner.optimizer)
            self.loss_scaler.step(runner.optimizer)
            self.loss_scaler.update(self._scale_update_param)
            runner.model.zero_grad()
            runner.optimizer.zero_grad()


def test_cumulative_subclass_with_mmcvs_loop_trains_as_the_stock_hook(make_runner, toy_loader):
    scale = dict(init_scale=2.**10, growth_interval=1)
    ours = CumulativeOwnLoop(cumulative_iters=2, loss_scale=scale)
    _, weights = _train(make_runner, toy_loader, ours, iters=5)
    stock = GradientCumulativeFp16OptimizerHook(cumulative_iters=2, loss_scale=scale)
    _, base_weights = _train(make_runner, toy_loader, stock, iters=5)
    assert (ours.divisible_iters, ours.remainder_iters) == (4, 1)
    assert ours.loss_scaler.get_scale() == stock.loss_scaler.get_scale() == 2.**13
    for a, b in zip(weights, base_weights):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_logged_scale_is_the_live_scale(make_runner, toy_loader):
    hook = Fp16OptimizerHook(loss_scale=dict(init_scale=4., growth_interval=1))
    log = ScaleLogger()
    _train(make_runner, toy_loader, hook, log, iters=3)
    assert log.scales == [8., 16., 32.]  # doubled after each good step
    assert hook.loss_scaler is hook.scaler and hook._scale_update_param is None
    static = Fp16OptimizerHook(loss_scale=64.)
    assert static._scale_update_param == 64. and static.loss_scaler.get_scale() == 64.


def test_subclass_without_init_sets_its_own_scaler(make_runner, toy_loader):
    scaler = torch.amp.GradScaler('cpu', init_scale=8., growth_interval=1)

    class OwnScaler(Fp16OptimizerHook):
        def __init__(self):  # mmcv 1.x's attributes, no base __init__
            self.grad_clip = None
            self._scale_update_param = None
            self.loss_scaler = scaler

    hook = OwnScaler()
    runner, _ = _train(make_runner, toy_loader, hook, iters=3)
    assert hook.loss_scaler is scaler and scaler.get_scale() == 64.  # the step used it
    assert runner.num_updates == 3


def test_scaler_state_loaded_before_the_run_is_kept(make_runner, toy_loader):
    # mmcv's before_run resumes with loss_scaler.load_state_dict: a scaler read early is used.
    hook = Fp16OptimizerHook(loss_scale='dynamic')
    early = hook.loss_scaler
    early.load_state_dict(dict(scale=16., growth_factor=2., backoff_factor=0.5,
                               growth_interval=1, _growth_tracker=0))
    _train(make_runner, toy_loader, hook, iters=2)
    assert hook.loss_scaler.get_scale() == 64.


def test_legacy_copy_helpers_copy_as_mmcv():
    half = nn.Linear(3, 2).half()
    half.weight.grad = torch.full_like(half.weight, 0.5)  # the bias has no gradient
    fp32 = [torch.zeros(2, 3), torch.zeros(2)]
    hook = Fp16OptimizerHook()
    hook.copy_grads_to_fp32(half, fp32)
    assert fp32[0].grad.dtype == torch.float32
    assert torch.equal(fp32[0].grad, torch.full((2, 3), .5))
    assert fp32[1].grad is None
    fp32[0].add_(1.25)
    hook.copy_params_to_fp16(half, fp32)
    assert half.weight.dtype == torch.float16 and torch.equal(half.weight.float(), fp32[0])
    assert torch.equal(half.bias, torch.zeros(2, dtype=torch.float16))
