"""Issue 23 items 4 and 6: every verdict on a schedule backed by mmengine 0.10's own Runner."""

import pytest
from convert_harness import assert_same, run_mmengine, run_mtrain

from mtrain.config_convert import to_mmcv, to_mmengine

SGD = dict(type='SGD', lr=0.02, momentum=0.9, weight_decay=1e-4)


def warmup_cosine(warmup_end):
    """mmdet3d style: an iteration warmup under a floored cosine by epoch (8 iterations/epoch)."""
    return dict(optim_wrapper=dict(type='OptimWrapper', optimizer=SGD), param_scheduler=[
        dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=warmup_end),
        dict(type='CosineAnnealingLR', T_max=6, eta_min=2e-4, by_epoch=True, begin=0, end=6)],
        train_cfg=dict(by_epoch=True, max_epochs=6))


def test_warmup_under_floored_cosine_is_reported_lossy_and_is(tmp_path):
    """Item 4: lossy never silent. A 12-iteration warmup outlasts the first 8-iteration epoch."""
    engine = warmup_cosine(13)
    converted, report = to_mmcv(engine)
    [entry] = report.lossy_entries
    assert 'with a floor' in entry.reason and 'first epoch' in entry.reason
    with pytest.raises(AssertionError, match='iteration 8'):
        assert_same(run_mmengine(engine, str(tmp_path / 'e')),
                    run_mtrain(converted, str(tmp_path / 'm')))


def test_the_condition_in_the_reason_is_the_real_one(tmp_path):
    """A warmup that ends within epoch 1 gives the same numbers (the reason says when)."""
    engine = warmup_cosine(8)
    converted, _ = to_mmcv(engine)
    assert_same(run_mmengine(engine, str(tmp_path / 'e')),
                run_mtrain(converted, str(tmp_path / 'm')))


@pytest.mark.parametrize('lr_config', [
    dict(policy='step', step=[2], warmup='exp', warmup_iters=10, warmup_ratio=0.01),
    dict(policy='CosineRestart', periods=[2, 2], restart_weights=[1, 0.5], min_lr=1e-3),
    dict(policy='CosineRestart', periods=[2, 2], restart_weights=[1, 0.5], min_lr_ratio=0.1),
    dict(policy='FlatCosineAnnealing', start_percent=0.5, min_lr_ratio=0.05),
    dict(policy='FlatCosineAnnealing', start_percent=0.3, min_lr=1e-3, by_epoch=False),
])
def test_exact_translations_hold_in_both_directions(lr_config, tmp_path):
    """Item 6: exp warmup = LinearLR(end=1) × ExponentialLR; restart weights r + w (1 - r);
    flat-cosine = CosineAnnealingLR(begin=start), which counts its own steps from begin."""
    runner = dict(type='EpochBasedRunner', max_epochs=4)
    if lr_config.get('by_epoch') is False:
        runner = dict(type='IterBasedRunner', max_iters=37)
    mmcv = dict(optimizer=SGD, lr_config=lr_config, runner=runner)
    engine, report = to_mmengine(mmcv)
    assert not report.is_lossy, report.format()
    back, report = to_mmcv(engine)
    assert not report.is_lossy, report.format()
    assert back['lr_config']['policy'] == mmcv['lr_config']['policy']
    expected = run_mtrain(mmcv, str(tmp_path / 'mmcv'))
    assert_same(run_mmengine(engine, str(tmp_path / 'engine')), expected)
    assert_same(run_mtrain(back, str(tmp_path / 'back')), expected)


def test_restart_weights_with_absolute_floor_and_lr_multipliers_stay_lossy():
    mmcv = dict(optimizer=dict(SGD, paramwise_cfg=dict(custom_keys={'3': dict(lr_mult=0.1)})),
                lr_config=dict(policy='CosineRestart', periods=[2, 2], restart_weights=[1, 0.5],
                               min_lr=1e-3), runner=dict(type='EpochBasedRunner', max_epochs=4))
    _, report = to_mmengine(mmcv)
    assert [e.source for e in report.lossy_entries] == ["lr_config.policy='CosineRestart'"]
