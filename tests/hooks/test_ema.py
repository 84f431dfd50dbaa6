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
        self.weights = [_params(runner.model_wrapper.module)]
        self._seen = runner.num_updates

    def after_train_iter(self, runner):
        if runner.num_updates != self._seen:
            self._seen = runner.num_updates
            self.weights.append(_params(runner.model_wrapper.module))


def _expected_ema(weights, momentum, warm_up, interval=1):
    """mmcv 1.x's formula: ema = (1 - m) ema + m param,

    m = min(momentum ** interval, (1 + t) / (warm_up + t)).
    """
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


def test_average_is_mmcvs_mul_then_add_bitwise(make_runner, toy_loader):
    # mmcv 1.7.2 EMAHook.after_train_iter: buffer.mul_(1 - m).add_(m, param), per tensor
    runner = make_runner(by_epoch=False, max_len=20)
    runner.register_hook(OptimizerHook())
    ema, recorder = EMAHook(momentum=0.0123, warm_up=3), UpdateRecorder()
    runner.register_hook(ema)
    runner.register_hook(recorder)
    runner.run([toy_loader], [('train', 1)])
    expected = {n: p.clone() for n, p in recorder.weights[0].items()}
    for t, params in enumerate(recorder.weights[1:]):
        m = min(0.0123, (1 + t) / (3 + t))
        for name, average in expected.items():
            average.mul_(1 - m).add_(params[name], alpha=m)
    assert all(torch.equal(ema.ema[n], expected[n]) for n in expected)


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
                runner.model_wrapper.module.fc1.weight.grad[0, 0] = float('inf')

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
        self.seen.append(_params(runner.model_wrapper.module))


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
    trained = _params(runner.model_wrapper.module)
    _assert_close(seen.seen[0], ema.ema if evaluate_ema else trained, atol=0)
    # ... and the model holds the trained weights again afterwards.
    assert not torch.equal(ema.ema['fc1.weight'], trained['fc1.weight'])


@pytest.mark.parametrize('kwargs, match', [
    (dict(momentum=1.5), 'momentum'), (dict(interval=0), 'interval'),
    (dict(warm_up=-1), 'warm_up')])
def test_bad_arguments_are_clear_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        EMAHook(**kwargs)


class _Ramp(torch.nn.Module):
    """One weight w; loss -w, so each SGD step (lr 1) adds exactly 1: w = number of updates."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(()))

    def forward(self, img, gt_label=None):
        return {'loss': -self.w + 0 * img.sum()}


@pytest.mark.parametrize('interval, warm_up, expected', [
    # m = min(0.5 ** 2, (1 + t) / (1 + t)) = 0.25 at updates t = 0, 2, 4 (w = 1, 3, 5):
    # 0.75 * 0 + 0.25 * 1 = 0.25;  0.75 * 0.25 + 0.25 * 3 = 0.9375;  0.75 * 0.9375 + 1.25
    (2, 1, 1.953125),
    # interval 1, warm_up 3: m = min(0.5, (1+t)/(3+t)) = 1/3, 1/2, 1/2, ... (w = t + 1)
    # 2/3 * 0 + 1/3 = 1/3;  then ema = (ema + w) / 2: (1/3 + 2)/2 = 7/6, (7/6 + 3)/2 = 25/12,
    # (25/12 + 4)/2 = 73/24, (73/24 + 5)/2 = 193/48, (193/48 + 6)/2 = 481/96
    (1, 3, 481 / 96),
    (2, 0, 1.953125),  # warm_up 0: momentum ** interval from the first update
])
def test_momentum_to_the_power_of_interval_by_hand(make_runner, toy_loader, interval, warm_up,
                                                    expected):
    runner = make_runner(model=_Ramp(), by_epoch=False, max_len=6, lr=1.0)
    runner.register_hook(OptimizerHook())
    ema = EMAHook(momentum=0.5, interval=interval, warm_up=warm_up)
    runner.register_hook(ema)
    runner.run([toy_loader], [('train', 1)])
    assert runner.model_wrapper.module.w.item() == 6
    assert ema.ema['w'].item() == pytest.approx(expected, abs=1e-6)


def test_an_mmcv_checkpoint_with_ema_buffers_starts_the_average(make_runner, toy_loader,
                                                                 tmp_path):
    # What mmcv 1.x's EMAHook leaves in a checkpoint: `ema_<name, dots as underscores>`
    # buffers beside the weights, in the model's state dict.
    model = make_runner().model_wrapper.module
    weights = {n: p.detach().clone() for n, p in model.named_parameters()}
    averages = {f"ema_{n.replace('.', '_')}": torch.full_like(p, 0.25)
                for n, p in weights.items()}
    path = str(tmp_path / 'mmcv_epoch_12.pth')
    torch.save({'meta': {'epoch': 12, 'iter': 1200, 'mmcv_version': '1.7.2'},
                'state_dict': {**weights, **averages}}, path)
    runner = make_runner(by_epoch=False, max_len=1)
    hook = EMAHook(resume_from=path)
    runner.register_hook(hook)
    runner.call_hook('before_run')
    assert hook.ema.keys() == weights.keys()
    assert all(torch.equal(v, torch.full_like(v, 0.25)) for v in hook.ema.values())
    # and mtrain's own state still goes into (and comes from) checkpoints
    assert torch.equal(hook.state_dict()['ema']['fc1.weight'], averages['ema_fc1_weight'])


class Unfreeze(Hook):
    """Freeze ``fc1`` before the run; unfreeze it before iteration ``at`` (an unfreeze schedule)."""

    priority = 'HIGHEST'

    def __init__(self, at):
        self.at = at

    def before_run(self, runner):
        if runner.iter < self.at:
            runner.model_wrapper.module.fc1.requires_grad_(False)

    def before_train_iter(self, runner):
        if runner.iter == self.at:
            runner.model_wrapper.module.fc1.requires_grad_(True)


def test_a_parameter_unfrozen_mid_run_is_averaged(make_runner, toy_loader):
    # Issue 22 item 2: the averaged parameters were those trainable at before_run.
    runner = make_runner(by_epoch=False, max_len=6, momentum=0.9)
    recorder, ema = UpdateRecorder(), EMAHook(momentum=0.3, warm_up=2)
    for hook in (OptimizerHook(), Unfreeze(at=2), ema, recorder):
        runner.register_hook(hook)
    runner.run([toy_loader], [('train', 1)])
    assert not torch.equal(recorder.weights[-1]['fc1.weight'], recorder.weights[2]['fc1.weight'])
    _assert_close(ema.ema, _expected_ema(recorder.weights, 0.3, 2), atol=1e-6)


def _accuracy(model, loader):
    model.eval()
    with torch.no_grad():
        scores = torch.cat([model(**batch) for batch in loader])
    return loader.dataset.evaluate(scores)['accuracy']


def test_the_best_checkpoint_holds_the_ema_weights_that_were_scored(make_runner, toy_dataset,
                                                                      tmp_path):
    # Issue 22 item 5: the best file was chosen on the averages' score but held the trained
    # weights. Evaluated again, its weights must give the logged best score.
    val = build_dataloader(toy_dataset, samples_per_gpu=16, workers_per_gpu=0, shuffle=False)
    train = build_dataloader(toy_dataset, samples_per_gpu=8, workers_per_gpu=0, seed=0)
    runner = make_runner(by_epoch=True, max_len=3, lr=0.5, momentum=0.9)
    runner.register_hook(OptimizerHook())
    runner.register_hook(EMAHook(momentum=0.01, warm_up=1))
    evaluation = EvalHook(val, save_best='accuracy')
    runner.register_hook(evaluation, 'LOW')
    runner.run([train], [('train', 1)])
    best = torch.load(evaluation.best_ckpt_path, weights_only=True)
    model = type(runner.model_wrapper.module)()
    model.load_state_dict(best['state_dict'])
    assert _accuracy(model, val) == evaluation.best_score
    # (the trained weights score differently: the test tells the two apart)
    model.load_state_dict(best['hooks']['EMAHook']['trained'])
    assert _accuracy(model, val) != evaluation.best_score
    # A run resumed from the best file trains on from the trained weights, not the averages.
    resumed = make_runner(by_epoch=True, max_len=3)
    resumed.register_hook(OptimizerHook())
    resumed.register_hook(EMAHook(momentum=0.01, warm_up=1))
    resumed.resume(evaluation.best_ckpt_path)
    resumed.call_hook('before_run')
    _assert_close(_params(resumed.model_wrapper.module), best['hooks']['EMAHook']['trained'], atol=0)
    _assert_close(resumed.hooks[-1].ema, best['state_dict'], atol=0)
