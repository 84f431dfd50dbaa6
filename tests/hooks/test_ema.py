"""EMAHook: mmcv's averaging formula, once per optimizer update, in checkpoints, for evaluation."""

import pytest
import torch

from mtrain.datasets import build_dataloader
from mtrain.hooks import (CheckpointHook, EMAHook, EvalHook, Fp16OptimizerHook,
                          GradientCumulativeOptimizerHook, Hook, OptimizerHook)


def _params(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


class UpdateRecorder(Hook):
    """The weights after every optimizer update (and the initial ones)."""

    priority = 'LOWEST'

    def __init__(self):
        self.weights = []
        self._seen = 0

    def before_run(self, runner):
        self.weights = [_params(runner.model.module)]
        self._seen = runner.num_updates

    def after_train_iter(self, runner):
        if runner.num_updates != self._seen:
            self._seen = runner.num_updates
            self.weights.append(_params(runner.model.module))


def _expected_ema(weights, momentum, warm_up, interval=1):
    """mmcv 1.x's formula: ema = (1 - m) ema + m param, m = min(momentum**interval, (1+t)/(warm_up+t))."""
    ema = dict(weights[0])
    for t, params in enumerate(weights[1:]):
        if t % interval:
            continue
        m = min(momentum ** interval, (1 + t) / (warm_up + t))
        ema = {n: (1 - m) * ema[n] + m * params[n] for n in ema}
    return ema


def _assert_close(a, b, atol=1e-6):
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=atol)


@pytest.mark.parametrize('momentum, warm_up, interval', [(0.5, 4, 1), (0.2, 1, 2)])
def test_average_follows_mmcv_formula(make_runner, toy_loader, momentum, warm_up, interval):
    runner = make_runner(by_epoch=False, max_len=6)
    runner.register_hook(OptimizerHook())
    ema = EMAHook(momentum=momentum, warm_up=warm_up, interval=interval)
    recorder = UpdateRecorder()
    runner.register_hook(ema)
    runner.register_hook(recorder)
    runner.run([toy_loader], [('train', 1)])
    assert len(recorder.weights) == 7
    _assert_close(ema.ema, _expected_ema(recorder.weights, momentum, warm_up, interval))


def test_micro_steps_and_skipped_fp16_steps_do_not_move_the_average(make_runner, toy_loader):
    class InjectInf(Hook):
        def after_backward(self, runner):
            if runner.iter == 1:  # the second update overflows and is skipped
                runner.model.module.fc1.weight.grad[0, 0] = float('inf')

    runner = make_runner(by_epoch=False, max_len=8)
    runner.register_hook(GradientCumulativeOptimizerHook(cumulative_iters=2))
    ema, recorder = EMAHook(momentum=0.5, warm_up=1), UpdateRecorder()
    for hook in (ema, recorder):
        runner.register_hook(hook)
    runner.run([toy_loader], [('train', 1)])
    assert runner.num_updates == 4 and len(recorder.weights) == 5  # 8 iterations, 4 updates
    _assert_close(ema.ema, _expected_ema(recorder.weights, 0.5, 1))

    fp16 = make_runner(by_epoch=False, max_len=4)
    fp16.register_hook(Fp16OptimizerHook(loss_scale=512.))
    fp16.register_hook(InjectInf())
    ema, recorder = EMAHook(momentum=0.5, warm_up=1), UpdateRecorder()
    for hook in (ema, recorder):
        fp16.register_hook(hook)
    fp16.run([toy_loader], [('train', 1)])
    assert fp16.num_updates == 3 and len(recorder.weights) == 4
    _assert_close(ema.ema, _expected_ema(recorder.weights, 0.5, 1))


def test_averages_are_checkpointed_and_a_resume_continues_them(make_runner, toy_loader, tmp_path):
    def runner_with_ema(*first_hooks):
        runner = make_runner(by_epoch=False, max_len=6)
        runner.register_hook(OptimizerHook())
        for hook in first_hooks:  # registered before the EMAHook: its priority must still win
            runner.register_hook(hook)
        ema = EMAHook(momentum=0.3, warm_up=2)
        runner.register_hook(ema)
        return runner, ema

    straight, straight_ema = runner_with_ema(CheckpointHook(interval=3, by_epoch=False))
    straight.run([toy_loader], [('train', 1)])
    stored = torch.load(tmp_path / 'iter_3.pth', weights_only=True)['hooks']['EMAHook']['ema']
    assert stored.keys() == straight_ema.ema.keys()

    resumed, resumed_ema = runner_with_ema()
    resumed.resume(str(tmp_path / 'iter_3.pth'))
    resumed.run([toy_loader], [('train', 1)])
    _assert_close(resumed_ema.ema, straight_ema.ema, atol=0)


def test_resume_from_seeds_the_average(make_runner, toy_loader, tmp_path):
    donor = make_runner(by_epoch=False, max_len=2)
    donor.register_hook(OptimizerHook())
    donor.register_hook(EMAHook(momentum=0.5))
    donor.run([toy_loader], [('train', 1)])
    with_ema = donor.save_checkpoint(str(tmp_path), filename_tmpl='iter_{}.pth')
    fresh = make_runner(by_epoch=False, max_len=1)
    hook = EMAHook(resume_from=with_ema)
    fresh.register_hook(hook)
    fresh.call_hook('before_run')
    _assert_close(hook.ema, donor.hooks[-1].ema, atol=0)
    with pytest.raises(FileNotFoundError, match='resume_from'):
        EMAHook(resume_from=str(tmp_path / 'missing.pth')).before_run(fresh)


class WeightsAtEvaluation(Hook):
    priority = 'HIGHEST'  # before the EMAHook swaps the weights back

    def __init__(self):
        self.seen = []

    def after_evaluation(self, runner):
        self.seen.append(_params(runner.model.module))


@pytest.mark.parametrize('evaluate_ema', [True, False])
def test_evaluation_uses_the_averaged_weights_when_asked(make_runner, toy_dataset, evaluate_ema):
    val_loader = build_dataloader(toy_dataset, samples_per_gpu=16, workers_per_gpu=0,
                                  shuffle=False)
    train_loader = build_dataloader(toy_dataset, samples_per_gpu=16, workers_per_gpu=0, seed=0)
    runner = make_runner(by_epoch=True, max_len=1)
    runner.register_hook(OptimizerHook())
    ema = EMAHook(momentum=0.1, warm_up=1, evaluate_ema=evaluate_ema)
    seen = WeightsAtEvaluation()
    for hook, priority in ((ema, None), (EvalHook(val_loader), 'LOW'), (seen, None)):
        runner.register_hook(hook, priority)
    runner.run([train_loader], [('train', 1)])
    trained = _params(runner.model.module)
    _assert_close(seen.seen[0], ema.ema if evaluate_ema else trained, atol=0)
    # ... and the model holds the trained weights again afterwards.
    assert not torch.equal(ema.ema['fc1.weight'], trained['fc1.weight'])


@pytest.mark.parametrize('kwargs, match', [
    (dict(momentum=1.5), 'momentum'), (dict(interval=0), 'interval'), (dict(warm_up=-1), 'warm_up')])
def test_bad_arguments_are_clear_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        EMAHook(**kwargs)
