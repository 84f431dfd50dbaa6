"""What the converter says about each key: exact, noted, or lossy with the reason."""

import os.path as osp

import pytest

from mtrain.config_convert import (convert, detect_schema, for_training, mapping_markdown,
                                   to_mmcv, to_mmengine)
from mtrain.utils import ConfigError

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
SGD = dict(type='SGD', lr=0.1, momentum=0.9)
RUNNER = dict(type='EpochBasedRunner', max_epochs=12)


def lossy_reasons(report):
    return {e.source: e.reason for e in report.lossy_entries}


def test_schema_detection_and_mixed_configs():
    assert detect_schema(dict(optimizer=SGD, runner=RUNNER)) == 'mmcv'
    assert detect_schema(dict(optim_wrapper={}, train_cfg={})) == 'mmengine'
    assert detect_schema(dict(model={})) == 'mmcv'
    with pytest.raises(ConfigError, match='mixes the mmcv 1.x keys'):
        detect_schema(dict(optimizer=SGD, optim_wrapper={}))  # no optim_wrapper.optimizer
    with pytest.raises(ConfigError, match=r"mixes the mmcv 1.x keys \['optimizer', 'lr_config'\]"):
        detect_schema(dict(lr_config={}, optimizer=SGD, optim_wrapper=dict(optimizer=SGD)))
    assert detect_schema(dict(optimizer=SGD, optim_wrapper=dict(optimizer=SGD))) == 'mmengine'
    with pytest.raises(ValueError, match='already is in the mmcv schema'):
        convert(dict(optimizer=SGD), to='mmcv')


@pytest.mark.parametrize('lr_config, source, reason', [
    (dict(policy='Cyclic', target_ratio=(10, 1e-4)), "lr_config.policy='Cyclic'",
     'cycle length (max_iters // cyclic_times) depends on the loader length'),
    (dict(policy='Inv', gamma=0.1, power=0.5), "lr_config.policy='Inv'", '(1 + gamma * t)'),
    (dict(policy='CosineAnnealing', min_lr=1e-3, warmup='linear', warmup_iters=10),
     'lr_config.warmup', 'a warmup under CosineAnnealing with a floor'),
    (dict(policy='step', step=[8], warmup='linear', warmup_iters=1, warmup_by_epoch=True),
     'lr_config.warmup_by_epoch', 'one iteration earlier'),
    (dict(policy='step', step=[8], warmup='exp', warmup_iters=1, warmup_by_epoch=True),
     'lr_config.warmup_by_epoch', 'needs the loader length'),
])
def test_lossy_lr_policies_say_why(lr_config, source, reason):
    _, report = to_mmengine(dict(optimizer=SGD, lr_config=lr_config, runner=RUNNER))
    assert reason in lossy_reasons(report)[source]


def test_cyclic_momentum_by_epoch_and_a_warmup_under_it_are_lossy():
    _, report = to_mmengine(dict(optimizer=SGD, runner=RUNNER, momentum_config=dict(
        policy='cyclic', target_ratio=(0.85, 0.95), warmup='linear')))
    reasons = lossy_reasons(report)
    assert 'a warmup under Cyclic' in reasons['momentum_config.warmup']
    assert 'EpochBasedRunner' in reasons["momentum_config.policy='Cyclic'"]


def test_notes_for_defaults_that_differ():
    engine, report = to_mmengine(dict(optimizer=SGD, fp16=dict(), runner=dict(
        type='IterBasedRunner', max_iters=100), lr_config=dict(policy='OneCycle', max_lr=0.1)))
    assert engine['optim_wrapper']['type'] == 'AmpOptimWrapper'
    assert engine['optim_wrapper']['loss_scale'] == 512.  # mmcv's static default, written out
    assert engine['param_scheduler'] == [dict(type='OneCycleLR', eta_max=0.1, total_steps=100,
                                              by_epoch=False, begin=0, end=100)]
    notes = {e.source: e.reason for e in report.entries if e.kind == 'note'}
    assert "'dynamic'" in notes['fp16'] and 'by_epoch=False' in notes[
        "lr_config.policy='OneCycle'"]
    assert not report.is_lossy


def test_runtime_keys_without_counterpart():
    _, report = to_mmengine(dict(
        optimizer=SGD, runner=RUNNER, workflow=[('train', 1), ('val', 1)],
        batch_processor=dict(type='BasicBatchProcessor', channels_last=True),
        custom_hooks=[dict(type='EMAHook')],
        optimizer_config=dict(detect_anomalous_params=True), evaluation=dict(interval=5),
        data=dict(samples_per_gpu=2, train=dict(type='X'), val=dict(type='X'))))
    reasons = lossy_reasons(report)
    assert 'val losses' in reasons['workflow']
    assert 'mtrain-only' in reasons['batch_processor']
    assert 'copies the weights at its first update' in reasons['custom_hooks.0']
    assert 'OptimWrapper has no such option' in reasons['optimizer_config.detect_anomalous_params']
    assert 'mmengine would after epochs [5, 10, 12]' in reasons['evaluation.interval']


def test_chains_no_single_mmcv_policy_expresses():
    engine = dict(optim_wrapper=dict(optimizer=SGD), train_cfg=dict(max_epochs=12),
                  param_scheduler=[
                      dict(type='MultiStepLR', milestones=[4], begin=0, end=6),
                      dict(type='CosineAnnealingLR', T_max=6, begin=6, end=12)])
    back, report = to_mmcv(engine)
    reasons = lossy_reasons(report)
    assert 'only the first is kept' in reasons['param_scheduler']
    assert 'stops before the run ends' in reasons['param_scheduler: MultiStepLR']
    assert back['lr_config']['policy'] == 'step'  # the nearest, for --allow-lossy


def test_mmengine_era_poly_is_one_step_off():
    """mmseg 1.x writes PolyLR(end=160000) for 160k iterations: eta_min at 159999."""
    engine = dict(optim_wrapper=dict(optimizer=SGD), param_scheduler=[
        dict(type='PolyLR', eta_min=1e-4, power=0.9, begin=0, end=160000, by_epoch=False)],
        train_cfg=dict(type='IterBasedTrainLoop', max_iters=160000))
    back, report = to_mmcv(engine)
    assert 'exact when end = run length + 1' in lossy_reasons(report)[
        'param_scheduler: PolyLR']
    assert back['lr_config'] == dict(policy='poly', power=0.9, min_lr=1e-4, by_epoch=False)


def test_mmengine_runtime_sections_to_mtrain():
    engine = dict(
        optim_wrapper=dict(type='AmpOptimWrapper', optimizer=SGD,
                           clip_grad=dict(max_norm=1, type='value')),
        train_cfg=dict(type='IterBasedTrainLoop', max_iters=100, val_interval=30),
        default_hooks=dict(logger=dict(type='LoggerHook', interval=5),
                           visualization=dict(type='DetVisualizationHook'),
                           checkpoint=dict(type='CheckpointHook', interval=50, by_epoch=False,
                                           save_best='auto')),
        visualizer=dict(type='Visualizer', vis_backends=[
            dict(type='LocalVisBackend'), dict(type='TensorboardVisBackend'),
            dict(type='WandbVisBackend', init_kwargs=dict(project='p')),
            dict(type='AimVisBackend')]),
        randomness=dict(seed=3, diff_rank_seed=True), load_from='a.pth', resume=True,
        train_dataloader=dict(batch_size=4, num_workers=2, dataset=dict(type='X'),
                              sampler=dict(type='InfiniteSampler', shuffle=True)),
        val_dataloader=dict(batch_size=1, dataset=dict(type='X'),
                            sampler=dict(type='DefaultSampler', shuffle=False)),
        val_evaluator=dict(type='Accuracy', topk=(1, 5)), val_cfg=dict(type='ValLoop'))
    back, report = to_mmcv(engine)
    assert back['fp16'] == dict(loss_scale='dynamic')
    assert back['log_config'] == dict(interval=5, hooks=[
        dict(type='TextLoggerHook'), dict(type='TensorboardLoggerHook'),
        dict(type='WandbLoggerHook', init_kwargs=dict(project='p'))])
    assert back['checkpoint_config'] == dict(interval=50, by_epoch=False)
    assert back['evaluation'] == dict(interval=30, metric=['accuracy', 'accuracy_top5'],
                                      by_epoch=False, save_best='auto')
    assert back['data'] == dict(train=dict(type='X'), samples_per_gpu=4, workers_per_gpu=2,
                                val=dict(type='X'),
                                val_dataloader=dict(samples_per_gpu=1, workers_per_gpu=0))
    assert back['resume_from'] == 'a.pth' and back['seed'] == 3
    reasons = lossy_reasons(report)
    assert 'by norm only' in reasons['optim_wrapper.clip_grad']
    assert 'grad_clip' not in back['optimizer_config']  # clip_value is no clip_grad_norm_ arg
    assert 'no mtrain logger hook' in reasons['visualizer.vis_backends.3']
    assert 'visualisation' in reasons['default_hooks.visualization']
    assert 'iterations [30, 60, 90, 100], mmcv would after iterations [30, 60, 90]' in \
        reasons['train_cfg.val_interval']
    assert 'diff_rank_seed' in reasons.__repr__()


@pytest.mark.parametrize('extra, key', [
    (dict(strategy=dict(type='DeepSpeedStrategy')), 'strategy'),
    (dict(runner_type='FlexibleRunner'), 'runner_type'),
    (dict(compile=dict(target='val_step')), 'compile.target'),
])
def test_training_refuses_mmengine_only_features(extra, key):
    cfg = dict(optim_wrapper=dict(optimizer=SGD), train_cfg=dict(max_epochs=1), **extra)
    with pytest.raises(ConfigError) as info:
        for_training(cfg)
    assert info.value.key == key


def test_docs_mapping_is_generated_from_the_table():
    with open(osp.join(ROOT, 'docs', 'config.md')) as f:
        doc = f.read()
    start, end = '<!-- mapping: generated -->\n', '<!-- mapping: end -->'
    section = doc[doc.index(start) + len(start):doc.index(end)]
    assert section == mapping_markdown(), (
        'docs/config.md is out of date: python -m mtrain.config_convert.table docs/config.md')
