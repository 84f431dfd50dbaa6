"""Every lossy schedule verdict measured, every former one now exact proven, in mmengine's Runner.

A lossy verdict in the converter's table carries the largest relative lr/momentum
difference between the two frameworks on a small case (:data:`LOSSY_EVIDENCE`);
this module reruns each case, mtrain on one side and mmengine 0.10.7's real
``Runner`` on the other, and checks the recorded number (2 significant digits)
and that the difference is real. The translations that replaced former lossy
verdicts (Cyclic, OneCycle momentum, momentum warmup, constant warmup by epoch)
are checked to rtol 1e-6.
"""

import pytest
from convert_harness import assert_same, run_mmengine, run_mtrain

from mtrain.config_convert import to_mmcv, to_mmengine
from mtrain.config_convert.table import LOSSY_EVIDENCE

SGD = dict(type='SGD', lr=0.02, momentum=0.9, weight_decay=1e-4)
ADAMW = dict(type='AdamW', lr=1e-3, betas=(0.9, 0.999), weight_decay=0.05)
HEAD_LR = dict(custom_keys={'3.': dict(lr_mult=0.1)})  # two base lrs


def epochs(n):
    return dict(type='EpochBasedRunner', max_epochs=n)


def iters(n):
    return dict(type='IterBasedRunner', max_iters=n)


def mmcv(lr_config, runner, optimizer=SGD, **extra):
    return dict(optimizer=optimizer, lr_config=lr_config, runner=runner, **extra)


def engine(schedulers, **train_cfg):
    return dict(optim_wrapper=dict(type='OptimWrapper', optimizer=SGD),
                param_scheduler=schedulers, train_cfg=train_cfg)


WARMUP_BY_EPOCH = dict(policy='step', step=[3], warmup_iters=1, warmup_ratio=0.1,
                       warmup_by_epoch=True)

#: The cases behind LOSSY_EVIDENCE: (source schema config, the lossy report key).
CASES = {
    'Inv': (mmcv(dict(policy='Inv', gamma=0.1, power=0.5), epochs(4)),
            "lr_config.policy='Inv'"),
    "warmup_by_epoch ('linear')": (mmcv(dict(WARMUP_BY_EPOCH, warmup='linear'), epochs(4)),
                                   'lr_config.warmup_by_epoch'),
    "warmup_by_epoch ('exp')": (mmcv(dict(WARMUP_BY_EPOCH, warmup='exp'), epochs(4)),
                                'lr_config.warmup_by_epoch'),
    'a warmup under CosineAnnealing with a floor': (mmcv(dict(
        policy='CosineAnnealing', min_lr=1e-3, by_epoch=False, warmup='linear',
        warmup_iters=10), iters(40)), 'lr_config.warmup'),
    'a warmup under OneCycle': (mmcv(dict(policy='OneCycle', max_lr=0.1, warmup='linear',
                                          warmup_iters=10), iters(40)), 'lr_config.warmup'),
    "Cyclic (anneal_strategy='linear')": (mmcv(dict(
        policy='cyclic', target_ratio=(10, 1e-4), anneal_strategy='linear'), iters(40)),
        "lr_config.policy='Cyclic'"),
    'OneCycle momentum, a phase boundary between iterations': (mmcv(
        dict(policy='OneCycle', max_lr=0.1), iters(37), momentum_config=dict(
            policy='OneCycle')), "momentum_config.policy='OneCycle'"),
    'CosineRestart: restart weights, absolute min_lr, two base lrs': (mmcv(dict(
        policy='CosineRestart', periods=[2, 2], restart_weights=[1, 0.5], min_lr=1e-3),
        epochs(4), optimizer=dict(SGD, paramwise_cfg=HEAD_LR)),
        "lr_config.policy='CosineRestart'"),
    'Step with min_lr, two base lrs': (mmcv(
        dict(policy='step', step=[1, 2, 3], gamma=0.1, min_lr=1e-4), epochs(4),
        optimizer=dict(SGD, paramwise_cfg=HEAD_LR)), "lr_config.policy='Step'.min"),
    'LinearAnnealing with an absolute min_lr, two base lrs': (mmcv(dict(
        policy='LinearAnnealing', min_lr=1e-3), epochs(4), optimizer=dict(
            SGD, paramwise_cfg=HEAD_LR)), "lr_config.policy='LinearAnnealing'"),
    'a by-epoch policy under IterBasedRunner': (mmcv(dict(policy='step', step=[2],
                                                          by_epoch=True), iters(40)),
                                                "lr_config.policy='Step'"),
    'a warmup under CosineRestart': (mmcv(dict(
        policy='CosineRestart', periods=[2, 2], restart_weights=[1, 0.5], min_lr=0.,
        warmup='linear', warmup_iters=10), epochs(4)), 'lr_config.warmup'),
    'a warmup under Cyclic': (mmcv(dict(policy='cyclic', target_ratio=(10, 1e-4),
                                        warmup='linear', warmup_iters=10), iters(40)),
                              'lr_config.warmup'),
    'two policies in a row, to mmcv': (engine(
        [dict(type='CosineAnnealingLR', T_max=2, by_epoch=True, begin=0, end=2),
         dict(type='ConstantLR', factor=0.5, by_epoch=True, begin=2, end=4)],
        by_epoch=True, max_epochs=4), 'param_scheduler'),
    'CosineAnnealingLR(T_max) shorter than the run, to mmcv': (engine(
        [dict(type='CosineAnnealingLR', T_max=3, eta_min=1e-3, by_epoch=True)],
        by_epoch=True, max_epochs=4), 'param_scheduler: CosineAnnealingLR'),
    'PolyLR(end=run length) to poly': (engine(
        [dict(type='PolyLR', eta_min=1e-4, power=0.9, begin=0, end=40, by_epoch=False)],
        type='IterBasedTrainLoop', max_iters=40), 'param_scheduler: PolyLR'),
    'LinearLR(convert_to_iter_based) warmup by epoch to mmcv': (engine(
        [dict(type='LinearLR', start_factor=0.1, by_epoch=True, begin=0, end=1,
              convert_to_iter_based=True),
         dict(type='MultiStepLR', milestones=[3], by_epoch=True, begin=0, end=4)],
        by_epoch=True, max_epochs=4), 'param_scheduler: LinearLR'),
    'an iteration warmup past epoch 1 under a floored cosine by epoch, to mmcv': (engine(
        [dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=13),
         dict(type='CosineAnnealingLR', T_max=6, eta_min=2e-4, by_epoch=True, begin=0,
              end=6)], by_epoch=True, max_epochs=6), 'param_scheduler'),
}


def max_rel_diff(expected, actual) -> float:
    """The largest |a - b| / |b| over iterations, parameters, lr and momentum."""
    assert len(expected) == len(actual)
    worst = 0.
    for a, b in zip(actual, expected):
        for name in b:
            for x, y in zip(a[name][:2], b[name][:2]):
                worst = max(worst, abs(x - y) / abs(y) if y else abs(x))
    return worst


@pytest.mark.parametrize('name', sorted(CASES))
def test_lossy_verdicts_are_measured(name, tmp_path):
    cfg, key = CASES[name]
    to_engine = 'optimizer' in cfg
    converted, report = to_mmengine(cfg) if to_engine else to_mmcv(cfg)
    assert key in {e.source for e in report.lossy_entries}, report.format()
    if to_engine:
        truth, got = run_mtrain(cfg, str(tmp_path / 'a')), run_mmengine(converted, str(
            tmp_path / 'b'))
    else:
        truth, got = run_mmengine(cfg, str(tmp_path / 'a')), run_mtrain(converted, str(
            tmp_path / 'b'))
    diff = max_rel_diff(truth, got)
    print(f'{name}: {diff:.2g}')
    assert diff > 1e-6
    assert f'{diff:.2g}' == f'{LOSSY_EVIDENCE[name][1]:.2g}', diff


CYCLIC_MOMENTUM = dict(policy='cyclic', target_ratio=(0.85 / 0.95, 1), step_ratio_up=0.4)

#: Former lossy verdicts with an exact translation now (mmcv schema, as mtrain runs it).
EXACT = {
    'cyclic_lr_and_momentum_two_base_lrs': mmcv(
        dict(policy='cyclic', target_ratio=(10, 1e-4), step_ratio_up=0.4), iters(40),
        optimizer=dict(SGD, paramwise_cfg=HEAD_LR), momentum_config=CYCLIC_MOMENTUM),
    'cyclic_three_cycles_shrinking_partial_last': mmcv(dict(
        policy='cyclic', target_ratio=5., cyclic_times=3, step_ratio_up=0.3, gamma=0.7),
        iters(41)),
    'one_cycle_momentum': mmcv(dict(policy='OneCycle', max_lr=0.1, pct_start=0.25),
                               iters(40), momentum_config=dict(policy='OneCycle')),
    'one_cycle_momentum_three_phase_adamw': mmcv(
        dict(policy='OneCycle', max_lr=0.01, pct_start=0.25, three_phase=True), iters(40),
        optimizer=ADAMW, momentum_config=dict(policy='OneCycle', pct_start=0.25,
                                              three_phase=True, base_momentum=0.8,
                                              max_momentum=0.92)),
    'one_cycle_momentum_linear': mmcv(
        dict(policy='OneCycle', max_lr=0.1, pct_start=0.25), iters(40), momentum_config=dict(
            policy='OneCycle', pct_start=0.25, anneal_strategy='linear')),
}
for _warmup in ('linear', 'constant', 'exp'):  # mtrain's momentum warmup (× the LR factor)
    EXACT[f'momentum_warmup_{_warmup}_under_cosine'] = mmcv(
        dict(policy='step', step=[3]), epochs(4), momentum_config=dict(
            policy='CosineAnnealing', min_momentum_ratio=0., warmup=_warmup, warmup_iters=10,
            warmup_ratio=0.5))
EXACT['step_with_min_lr'] = mmcv(dict(policy='step', step=[1, 2, 3], gamma=0.1, min_lr=1e-4),
                                 epochs(4))
EXACT['step_every_2_with_min_lr_by_iter'] = mmcv(dict(
    policy='step', step=2, gamma=0.5, min_lr=3e-3, by_epoch=False), iters(12))
EXACT['poly_by_iteration_in_an_epoch_runner'] = mmcv(dict(
    policy='poly', power=0.9, min_lr=1e-4, by_epoch=False), epochs(3))
EXACT['linear_annealing_absolute_min_lr_by_iteration_in_an_epoch_runner'] = mmcv(dict(
    policy='LinearAnnealing', min_lr=1e-3, by_epoch=False), epochs(3))
EXACT['constant_warmup_by_epoch'] = mmcv(dict(WARMUP_BY_EPOCH, warmup='constant',
                                              warmup_iters=2), epochs(4))
ROUND_TRIP = tuple(EXACT)  # and each reads back as the mmcv policy it came from


@pytest.mark.parametrize('name', sorted(EXACT))
def test_former_lossy_verdicts_are_exact(name, tmp_path):
    cfg = EXACT[name]
    converted, report = to_mmengine(cfg)
    assert not report.is_lossy, report.format()
    expected = run_mtrain(cfg, str(tmp_path / 'mtrain'))
    assert_same(run_mmengine(converted, str(tmp_path / 'engine')), expected)
    if name in ROUND_TRIP:
        back, report = to_mmcv(converted)
        assert not report.is_lossy, report.format()
        assert_same(run_mtrain(back, str(tmp_path / 'back')), expected)
