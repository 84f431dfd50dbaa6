"""ParamSchedulerHook: resume continues mmengine's curve; config mistakes name the key."""

import pytest
from convert_harness import assert_same, run_mtrain

from mtrain.hooks import ParamSchedulerHook
from mtrain.utils import ConfigError

ENGINE = dict(
    optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1, momentum=0.9, weight_decay=1e-4)),
    param_scheduler=[
        dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=12),
        dict(type='CosineAnnealingLR', T_max=4, eta_min=1e-3, by_epoch=True, begin=0, end=4),
        dict(type='CosineAnnealingMomentum', eta_min=0.8, by_epoch=False, T_max=32, end=32)],
    train_cfg=dict(by_epoch=True, max_epochs=4))


def test_resume_mid_run_continues_the_same_curve(tmp_path):
    full = run_mtrain(ENGINE, str(tmp_path / 'full'))
    first = tmp_path / 'first'
    run_mtrain(ENGINE, str(first), runner=dict(type='EpochBasedRunner', max_epochs=2),
               checkpoint_config=dict(interval=1))
    resumed = run_mtrain(ENGINE, str(tmp_path / 'resumed'),
                         resume_from=str(first / 'epoch_2.pth'))
    assert len(full) == 32 and len(resumed) == 16
    assert_same(full[16:], resumed)


def test_unknown_scheduler_names_the_key():
    with pytest.raises(ConfigError, match="Did you mean 'CosineAnnealingLR'") as info:
        ParamSchedulerHook([dict(type='CosineAnealingLR')])
    assert info.value.key == 'param_scheduler.0.type'


def test_bad_scheduler_arguments_name_the_key(tmp_path):
    bad = dict(ENGINE, param_scheduler=[dict(type='MultiStepLR', milestone=[2])])
    with pytest.raises(ConfigError, match='MultiStepLR could not be built') as info:
        run_mtrain(bad, str(tmp_path))
    assert info.value.key == 'param_scheduler.0'
