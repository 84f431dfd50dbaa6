"""mmengine-era configs as they are written, run in mtrain and in mmengine 0.10.7's Runner.

Each case carries what real mmengine configs carry and the runtime sections of
``test_numerics.py`` did not: ``custom_hooks`` (mmdet 3.x configs have an
``EMAHook``), ``default_hooks`` overrides, an ``IterBasedTrainLoop`` under a
by-epoch schedule, a seeded shuffling sampler. Per-iteration lr, momentum and
weight decay must be mmengine's; with a shuffling sampler, the trained weights too.
"""

import pytest
from convert_harness import (assert_same, max_rel_weight_diff, run_mmengine, run_mtrain,
                             train_mmengine, train_mtrain, weights)

from mmengine.config import Config
from throwaway_package import write_package

from mtrain.config_convert import for_training, to_mmcv, to_mmengine
from mtrain.config_packages import use_importlib_lookups
from mtrain.utils import ConfigError

SGD = dict(type='SGD', lr=0.02, momentum=0.9, weight_decay=1e-4)
# mmdet 3.x's schedule_1x, shortened to 12 epochs of 8 iterations.
MMDET3_SCHEDULE = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=20),
    dict(type='MultiStepLR', begin=0, end=12, by_epoch=True, milestones=[8, 11], gamma=0.1)]
EMA = dict(type='EMAHook', ema_type='ExponentialMovingAverage', momentum=0.0002,
           update_buffers=True, priority=49)


def _engine(**extra):
    return dict(optim_wrapper=dict(type='OptimWrapper', optimizer=SGD),
                param_scheduler=MMDET3_SCHEDULE,
                train_cfg=dict(type='EpochBasedTrainLoop', max_epochs=12), **extra)


CASES = {
    'mmdet3_with_ema_hook': _engine(custom_hooks=[EMA]),
    'empty_custom_hooks': _engine(custom_hooks=[]),
    'default_hooks_overrides_and_custom_hooks': _engine(
        default_hooks=dict(param_scheduler=dict(type='ParamSchedulerHook'),
                           timer=dict(type='IterTimerHook'),
                           sampler_seed=dict(type='DistSamplerSeedHook')),
        custom_hooks=[dict(type='EMAHook', momentum=0.001)]),
    # Issue 33 item 3: mmengine fills `end` with max_epochs, which IterBasedTrainLoop sets
    # to 1: converted to iterations the scheduler ends after one epoch (8 iterations),
    # before its milestones (16, 24), so the lr never decays.
    'iter_loop_by_epoch_converted_no_end': dict(
        optim_wrapper=dict(type='OptimWrapper', optimizer=SGD),
        param_scheduler=[dict(type='MultiStepLR', milestones=[2, 3], by_epoch=True,
                              convert_to_iter_based=True)],
        train_cfg=dict(type='IterBasedTrainLoop', max_iters=32)),
    'iter_loop_by_epoch_converted_with_end': dict(
        optim_wrapper=dict(type='OptimWrapper', optimizer=SGD),
        param_scheduler=[dict(type='MultiStepLR', milestones=[2, 3], by_epoch=True,
                              convert_to_iter_based=True, end=4)],
        train_cfg=dict(type='IterBasedTrainLoop', max_iters=32)),
    # mmengine pops a default hook set to None: the schedulers are built (step-0 values
    # applied) and never stepped. Before, mtrain stepped them: lr 2e-5 rising to 0.02.
    'param_scheduler_hook_switched_off': _engine(default_hooks=dict(param_scheduler=None)),
    'iter_loop_by_epoch_no_end': dict(
        optim_wrapper=dict(type='OptimWrapper', optimizer=SGD),
        param_scheduler=[dict(type='LinearLR', start_factor=0.1, by_epoch=False, end=5),
                         dict(type='ExponentialLR', gamma=0.5, by_epoch=True)],
        train_cfg=dict(type='IterBasedTrainLoop', max_iters=24)),
}


@pytest.mark.parametrize('name', sorted(CASES))
def test_config_trains_with_mmengine_schedule(name, tmp_path):
    engine = CASES[name]
    expected = run_mmengine(engine, str(tmp_path / 'engine'))
    actual = run_mtrain(engine, str(tmp_path / 'mtrain'))
    assert_same(expected, actual)
    lrs = [min(v[0] for v in it.values()) for it in actual]
    if name == 'param_scheduler_hook_switched_off':
        assert set(lrs) == {0.02 * 0.001}  # LinearLR's step-0 value, never stepped
    else:
        assert len(set(lrs)) > 1 or name.startswith('iter_loop'), 'no schedule ran'


#: CASES the mmcv schema cannot say exactly: mmengine's EMAHook (test_hook_evidence.py), a
#: by-epoch schedule converted to iterations by the loader's length, and one by epoch in an
#: iteration loop (mmengine never steps it).
LOSSY_TO_MMCV = ('default_hooks_overrides_and_custom_hooks', 'mmdet3_with_ema_hook',
                 'iter_loop_by_epoch_converted_no_end', 'iter_loop_by_epoch_converted_with_end',
                 'iter_loop_by_epoch_no_end', 'param_scheduler_hook_switched_off')


@pytest.mark.parametrize('name', sorted(CASES))
def test_config_converted_to_mmcv_trains_as_reported(name, tmp_path):
    mmcv, report = to_mmcv(CASES[name])
    assert report.is_lossy == (name in LOSSY_TO_MMCV), report.format()
    if not report.is_lossy:
        assert_same(run_mmengine(CASES[name], str(tmp_path / 'engine')),
                    run_mtrain(mmcv, str(tmp_path / 'mtrain')))


def test_custom_hooks_keep_the_param_scheduler_hook():
    """The symptom at its root: the translated config names the ParamSchedulerHook."""
    for hooks, types in (([], ['ParamSchedulerHook']), ([EMA], ['ParamSchedulerHook',
                                                                  'EMAHook'])):
        cfg = for_training(_engine(custom_hooks=hooks))
        assert [h['type'] for h in cfg['custom_hooks']] == types


@pytest.mark.parametrize('slot', ['param_scheduler', 'checkpoint', 'logger', 'sampler_seed'])
def test_a_replaced_default_hook_is_refused_naming_the_key(slot):
    """mmengine runs any hook type a config puts in a slot; mtrain cannot run a hook written
    for mmengine's API there. Before, the type was dropped without a word."""
    cfg = _engine(default_hooks={slot: dict(type='MyOwnHook', interval=3)})
    with pytest.raises(ConfigError) as err:
        for_training(cfg)
    assert err.value.key == f'default_hooks.{slot}.type' and 'custom_hooks' in str(err.value)


def test_a_switched_off_sampler_seed_hook_is_reported_lossy():
    _, report = to_mmcv(_engine(default_hooks=dict(sampler_seed=None, timer=None)))
    assert [e.source for e in report.lossy_entries] == ['default_hooks.sampler_seed']


def test_a_seeded_shuffling_sampler_gives_mmengines_order(tmp_path):
    """Issue 33 item 8: ``train_dataloader.sampler.seed`` orders the epochs as mmengine's."""
    engine = dict(optim_wrapper=dict(type='OptimWrapper', optimizer=SGD),
                  train_cfg=dict(type='EpochBasedTrainLoop', max_epochs=3),
                  sampler=dict(shuffle=True, seed=3))
    expected, _ = train_mmengine(engine, str(tmp_path / 'engine'))
    actual, _ = train_mtrain(engine, str(tmp_path / 'mtrain'))
    assert max_rel_weight_diff(weights(expected.model), weights(actual.model)) < 1e-5


def test_a_base_chain_of_several_files_trains_as_in_mmengine(tmp_path, monkeypatch):
    """A package's schedule (itself based on its optimizer file), a local runtime file with
    custom_hooks and default_hooks, and the child's override: four files, read once
    (with mtrain's package lookups), run in both."""
    monkeypatch.syspath_prepend(str(write_package(tmp_path / 'site')))
    (tmp_path / 'runtime.py').write_text(
        "default_hooks = dict(param_scheduler=dict(type='ParamSchedulerHook'))\n"
        "custom_hooks = [dict(type='EMAHook', momentum=0.001)]\n")
    (tmp_path / 'cfg.py').write_text(
        "_base_ = ['mmyolo::_base_/schedule.py', './runtime.py']\n"
        "param_scheduler = [dict(type='LinearLR', start_factor=0.1, by_epoch=False, end=5),\n"
        "                   dict(type='MultiStepLR', milestones=[1, 2], by_epoch=True)]\n")
    use_importlib_lookups()
    engine = Config.fromfile(str(tmp_path / 'cfg.py')).to_dict()
    assert engine['custom_hooks'] and engine['optim_wrapper']['optimizer']['lr'] == 0.02
    actual = run_mtrain(engine, str(tmp_path / 'mtrain'))
    assert_same(run_mmengine(engine, str(tmp_path / 'engine')), actual)
    assert actual[0]['0.weight'][0] == pytest.approx(0.002)  # the child's chain ran whole
    assert actual[-1]['0.weight'][0] == pytest.approx(0.0002)


def test_the_run_seed_seeds_the_converted_sampler():
    """The other way: mtrain's train sampler takes the run's seed; mmengine's must be told."""
    mmcv = dict(optimizer=SGD, runner=dict(type='EpochBasedRunner', max_epochs=2), seed=3,
                data=dict(samples_per_gpu=8, train=dict(type='CvToyData')))
    engine, _ = to_mmengine(mmcv)
    assert engine['train_dataloader']['sampler'] == dict(type='DefaultSampler', shuffle=True,
                                                         seed=3)
    assert engine['randomness']['seed'] == 3
    back, report = to_mmcv(engine)
    assert back['seed'] == 3 and not report.is_lossy, report.format()
