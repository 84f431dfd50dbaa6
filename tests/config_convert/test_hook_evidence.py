"""Lossy verdicts on hooks and the optimizer step, measured on trained weights in both frameworks.

Each case of :data:`WEIGHT_EVIDENCE` runs mtrain on one side and mmengine
0.10.7's real ``Runner`` on the other (16 iterations of the harness's toy
network) and checks the recorded largest relative weight difference (2
significant digits) and that it is real. For the EMA, the test also checks
*why* they differ: mmcv's average (mtrain's) minus mmengine's is exactly
``(1 - m) ** K * (p_init - p_0)``, the share of the weights before training
that mmcv mixes in and mmengine's first-update copy leaves out; everything
else about the translation (momentum, interval) is exact.
"""

import pytest
from convert_harness import CvToyNet, max_rel_weight_diff, train_mmengine, train_mtrain, weights

from mtrain.config_convert import to_mmcv, to_mmengine
from mtrain.config_convert.table import WEIGHT_EVIDENCE

SGD = dict(type='SGD', lr=0.02, momentum=0.9, weight_decay=1e-4)
EPOCHS = dict(type='EpochBasedRunner', max_epochs=2)  # 16 iterations


def mmcv(**extra):
    return dict(optimizer=SGD, runner=EPOCHS, **extra)


def engine(clip_grad=None, **extra):
    return dict(optim_wrapper=dict(type='OptimWrapper', optimizer=SGD, clip_grad=clip_grad),
                train_cfg=dict(by_epoch=True, max_epochs=2), **extra)


def mtrain_ema(runner):
    hook = next(h for h in runner.hooks if type(h).__name__ == 'EMAHook')
    return {n.split('net.', 1)[1]: t.clone() for n, t in hook.ema.items()}


def engine_ema(runner):
    hook = next(h for h in runner.hooks if type(h).__name__ == 'EMAHook')
    return weights(hook.ema_model.module)


#: The cases behind WEIGHT_EVIDENCE: (source config, the lossy report key, what to compare).
CASES = {
    "clip_grad=dict(type='value'), to mmcv": (engine(dict(type='value', clip_value=0.1)),
                                              'optim_wrapper.clip_grad', 'weights'),
    'EMAHook to mmengine': (mmcv(custom_hooks=[dict(type='EMAHook', momentum=0.1, warm_up=1)]),
                            'custom_hooks.0', 'ema'),
    'EMAHook(interval=2) to mmengine': (mmcv(custom_hooks=[dict(
        type='EMAHook', momentum=0.1, interval=2, warm_up=1)]), 'custom_hooks.0', 'ema'),
    'EMAHook with a warm_up that acts, to mmengine': (mmcv(custom_hooks=[dict(
        type='EMAHook', momentum=0.5, warm_up=10)]), 'custom_hooks.0', 'ema'),
    'EMAHook(ExponentialMovingAverage) to mmcv': (engine(custom_hooks=[dict(
        type='EMAHook', momentum=0.1)]), 'custom_hooks.0', 'ema'),
    'EMAHook(MomentumAnnealingEMA) to mmcv': (engine(custom_hooks=[dict(
        type='EMAHook', ema_type='MomentumAnnealingEMA', momentum=0.1, gamma=10)]),
        'custom_hooks.0', 'ema'),
}


def _train_both(cfg, tmp_path):
    """(mtrain's runner, mmengine's runner, the report), each side on its own schema."""
    to_engine = 'optimizer' in cfg
    converted, report = to_mmengine(cfg) if to_engine else to_mmcv(cfg)
    mtrain_cfg, engine_cfg = (cfg, converted) if to_engine else (converted, cfg)
    ours, _ = train_mtrain(mtrain_cfg, str(tmp_path / 'mtrain'))
    theirs, _ = train_mmengine(engine_cfg, str(tmp_path / 'engine'))
    return ours, theirs, report


@pytest.mark.parametrize('name', sorted(CASES))
def test_lossy_weight_verdicts_are_measured(name, tmp_path):
    cfg, key, what = CASES[name]
    ours, theirs, report = _train_both(cfg, tmp_path)
    assert key in {e.source for e in report.lossy_entries}, report.format()
    if what == 'ema':
        diff = max_rel_weight_diff(engine_ema(theirs), mtrain_ema(ours))
        assert max_rel_weight_diff(weights(theirs.model), weights(ours.model)) < 1e-6
    else:
        diff = max_rel_weight_diff(weights(theirs.model), weights(ours.model))
    print(f'{name}: {diff:.2g}')
    assert diff > 1e-6
    assert f'{diff:.2g}' == f'{WEIGHT_EVIDENCE[name][1]:.2g}', diff


def test_clipping_by_value_is_all_the_difference(tmp_path):
    """Without its clip_grad the mmengine config trains mtrain's weights: the drop is the loss."""
    cfg = engine(dict(type='value', clip_value=0.1))
    converted, _ = to_mmcv(cfg)
    ours, _ = train_mtrain(converted, str(tmp_path / 'mtrain'))
    theirs, _ = train_mmengine(engine(), str(tmp_path / 'engine'))
    assert max_rel_weight_diff(weights(theirs.model), weights(ours.model)) < 1e-6


@pytest.mark.parametrize('interval,updates', [(1, 16), (2, 8)])
def test_ema_translation_differs_only_by_its_start(interval, updates, tmp_path):
    """mmcv's average − mmengine's = (1 − m)^K (p_init − p_0): the schedule itself is exact."""
    cfg = mmcv(custom_hooks=[dict(type='EMAHook', momentum=0.1, interval=interval,
                                  warm_up=1)])
    ours, theirs, _ = _train_both(cfg, tmp_path)
    first, _ = train_mtrain(dict(optimizer=SGD, runner=dict(type='IterBasedRunner',
                                                            max_iters=1)), str(tmp_path / 'one'))
    p_0, p_init = weights(first.model), weights(CvToyNet())  # _layers seeds each network alike
    share = (1 - 0.1 ** interval) ** updates
    predicted = {n: t + share * (p_init[n] - p_0[n]) for n, t in engine_ema(theirs).items()}
    assert max_rel_weight_diff(mtrain_ema(ours), predicted) < 1e-5


def test_ema_reports_name_each_argument_they_drop():
    back, report = to_mmcv(engine(custom_hooks=[
        dict(type='EMAHook', ema_type='StochasticWeightAverage'),
        dict(type='EMAHook', momentum=0.01, interval=4, begin_iter=10, update_buffers=True,
             priority='NORMAL')]))
    reasons = {e.source: e.reason for e in report.lossy_entries}
    assert "ema_type='StochasticWeightAverage'" in reasons['custom_hooks.0']
    assert 'begin_iter' in reasons['custom_hooks.1'] and 'update_buffers' in reasons[
        'custom_hooks.1']
    (hook, ) = back['custom_hooks']  # mtrain's EMAHook would reject ema_type: never passed on
    assert hook['momentum'] ** 4 == pytest.approx(0.01, rel=1e-12)
    assert (hook['interval'], hook['warm_up'], hook['priority']) == (4, 1, 'NORMAL')
    out, report = to_mmengine(mmcv(custom_hooks=[dict(type='EMAHook', resume_from='a.pth',
                                                      evaluate_ema=False)]))
    reason = report.lossy_entries[0].reason
    assert 'resume_from' in reason and 'evaluate_ema' in reason and 'warm_up' not in reason
    assert out['custom_hooks'] == [dict(type='EMAHook', ema_type='ExponentialMovingAverage',
                                        momentum=0.0002, interval=1)]
