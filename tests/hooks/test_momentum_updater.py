"""Momentum updater hooks: mmcv 1.7.2's numbers, and a warmup that never overshoots."""

import pytest
import torch
from schedule_driver import (build_hooks, column, drive_epochs, drive_iters, load_golden,
                             make_optimizer, make_runner, run_case)

from mtrain.hooks import momentum_updater
from mtrain.hooks.momentum_updater import (CosineAnnealingMomentumUpdaterHook,
                                           CyclicMomentumUpdaterHook,
                                           LinearAnnealingMomentumUpdaterHook,
                                           MomentumUpdaterHook, OneCycleMomentumUpdaterHook,
                                           StepMomentumUpdaterHook)
from mtrain.hooks.schedules.formulas import warmup_factor
from mtrain.registry import HOOKS
from mtrain.runner.training_hooks import build_training_hooks

GOLDEN = load_golden('momentum')
LAYOUT = GOLDEN['layout']  # 5 epochs of 7 iterations
CASES = {case['id']: case for case in GOLDEN['cases']}


def approx(expected):
    return [pytest.approx(row, rel=1e-12, abs=0) for row in expected]


def drive(hook, driver='epoch', optimizer='SGD', max_epochs=5, epoch_len=7):
    runner = make_runner(make_optimizer(optimizer), max_epochs if driver == 'epoch' else None,
                         epoch_len, max_epochs * epoch_len)
    record = (drive_epochs(runner, [hook], max_epochs) if driver == 'epoch'
              else drive_iters(runner, [hook]))
    return column(record, 'momentum'), runner.optimizer


# -- golden sequences from mmcv 1.7.2 (no momentum warmup: there mtrain differs) -----
@pytest.mark.parametrize('case_id', sorted(CASES))
def test_matches_mmcv(case_id):
    """Momentum (and lr, for paired policies) at every iteration, SGD and Adam."""
    case = CASES[case_id]
    for driver, cumulative in (('epoch', 1), ('iter', 1), ('epoch', 3)):
        record = run_case(case, LAYOUT, driver, cumulative_iters=cumulative)
        for key in ('lr', 'momentum'):
            expected = approx(case[key])
            got = column(record, key)
            assert got == expected, (driver, cumulative, key)


@pytest.mark.parametrize('case', GOLDEN['accumulation']['cases'], ids=lambda c: c['id'])
def test_matches_mmcv_under_accumulation_and_skipped_steps(case):
    """mmcv's momentum and lr at every iteration while updates come every 2 or 4 iterations."""
    record = run_case(case, GOLDEN['accumulation']['layout'], 'epoch')
    for key in ('lr', 'momentum'):
        assert column(record, key) == approx(case[key]), key


def test_golden_fixtures_cover_every_policy_and_both_optimizer_kinds():
    policies = {c['momentum_config']['type'] for c in CASES.values()}
    assert policies == set(momentum_updater.__all__) - {'MomentumUpdaterHook'}
    assert {c['optimizer'] for c in CASES.values()} == {'SGD', 'Adam'}


# -- names and priority ----------------------------------------------------------
@pytest.mark.parametrize('policy, cls', [
    ('step', StepMomentumUpdaterHook), ('CosineAnnealing', CosineAnnealingMomentumUpdaterHook),
    ('LinearAnnealing', LinearAnnealingMomentumUpdaterHook),
    ('Cyclic', CyclicMomentumUpdaterHook), ('OneCycle', OneCycleMomentumUpdaterHook)])
def test_policy_name_selects_the_class(policy, cls):
    name = (policy.title() if policy == policy.lower() else policy) + 'MomentumUpdaterHook'
    assert HOOKS.get(name) is cls


def test_momentum_config_builds_with_high_priority():
    [(hook, priority)] = build_training_hooks(
        momentum_config=dict(policy='CosineAnnealing', min_momentum_ratio=0.9), timer_config=None)
    assert type(hook) is CosineAnnealingMomentumUpdaterHook
    assert priority == 'HIGH' == MomentumUpdaterHook.priority


# -- warmup: the deliberate fix ------------------------------------------------------
@pytest.mark.parametrize('warmup', ['linear', 'constant', 'exp'])
@pytest.mark.parametrize('by_epoch', [True, False])
def test_warmup_scales_momentum_down_and_reaches_the_regular_value(warmup, by_epoch):
    kind = 'epoch' if by_epoch else 'iter'
    regular = CASES[f'CosineAnnealing1-{kind}-SGD']['momentum']  # mmcv, no warmup
    hook = CosineAnnealingMomentumUpdaterHook(min_momentum_ratio=0.5, by_epoch=by_epoch,
                                              warmup=warmup, warmup_iters=10, warmup_ratio=0.5)
    momentum, _ = drive(hook)
    for i, (got, want) in enumerate(zip(momentum, regular)):
        factor = warmup_factor(warmup, i, 10, 0.5) if i < 10 else 1
        assert got == pytest.approx([m * factor for m in want], rel=1e-12), i
        assert got[0] <= 0.9 and got[1] <= 0.8  # never above the configured momentum


def test_warmup_ramps_up_to_the_configured_momentum():
    hook = StepMomentumUpdaterHook(step=100, by_epoch=False, warmup='linear', warmup_iters=4,
                                   warmup_ratio=0.5)
    momentum, _ = drive(hook, max_epochs=1, epoch_len=6)
    assert [row[0] for row in momentum] == pytest.approx(
        [0.45, 0.5625, 0.675, 0.7875, 0.9, 0.9])


def test_warmup_by_epoch_under_iter_runner():
    hook = StepMomentumUpdaterHook(step=1, gamma=0.8, warmup='constant', warmup_iters=1,
                                   warmup_ratio=0.5, warmup_by_epoch=True)
    momentum, _ = drive(hook, driver='iter', max_epochs=2, epoch_len=3)
    assert hook.warmup_iters == 3  # one epoch of 3 iterations, learnt from the loader
    assert [row[0] for row in momentum] == pytest.approx([0.45] * 3 + [0.72] * 3)


# -- IterBasedRunner, Adam, param groups ------------------------------------------
def test_by_epoch_schedule_changes_at_epoch_boundaries_under_iter_runner():
    momentum, _ = drive(StepMomentumUpdaterHook(step=1, gamma=0.5), driver='iter',
                        max_epochs=3, epoch_len=2)
    assert [row[0] for row in momentum] == [0.9, 0.9, 0.45, 0.45, 0.225, 0.225]


def test_adam_schedules_beta1_and_keeps_beta2():
    _, optimizer = drive(LinearAnnealingMomentumUpdaterHook(min_momentum=0.5, by_epoch=False),
                         optimizer='Adam')
    assert [g['betas'][1] for g in optimizer.param_groups] == [0.999, 0.99]
    assert [g['initial_momentum'] for g in optimizer.param_groups] == [0.9, 0.85]


def test_one_cycle_replaces_the_optimizers_momentum_at_the_start():
    hook = OneCycleMomentumUpdaterHook(base_momentum=[0.8, 0.7], max_momentum=[0.95, 0.9])
    momentum, optimizer = drive(hook)
    assert momentum[0] == [0.95, 0.9]
    assert min(row[0] for row in momentum) == pytest.approx(0.8, abs=1e-3)
    assert [g['base_momentum'] for g in optimizer.param_groups] == [0.8, 0.7]


def test_optimizer_without_momentum_is_refused_with_a_sentence():
    optimizer = torch.optim.Adagrad(torch.nn.Linear(2, 2).parameters(), lr=0.1)
    runner = make_runner(optimizer, 2, 3, 6)
    with pytest.raises(ValueError, match=r'needs an optimizer with `momentum` .* or `betas`'):
        StepMomentumUpdaterHook(step=1).before_run(runner)


def test_resume_keeps_the_initial_momentum():
    optimizer = make_optimizer()
    runner = make_runner(optimizer, 5, 7, 35)
    hook = StepMomentumUpdaterHook(step=1, gamma=0.5)
    drive_epochs(runner, [hook], 2)
    assert optimizer.param_groups[0]['momentum'] == 0.45
    again = StepMomentumUpdaterHook(step=1, gamma=0.5)
    again.before_run(runner)  # momentum is 0.45 now; initial_momentum is still 0.9
    assert again.base_momentum == [0.9, 0.8]


def test_base_class_needs_a_policy():
    with pytest.raises(NotImplementedError, match='must implement get_momentum'):
        drive(MomentumUpdaterHook())


# -- invalid arguments -------------------------------------------------------------
@pytest.mark.parametrize('make, match', [
    (lambda: StepMomentumUpdaterHook(step=2, warmup='cos', warmup_iters=3),
     r"warmup must be 'constant', 'linear', 'exp' or None"),
    (lambda: StepMomentumUpdaterHook(step=2, warmup='linear', warmup_iters=3, warmup_ratio=0),
     r'warmup_ratio must be in \(0, 1\]'),
    (lambda: CosineAnnealingMomentumUpdaterHook(), r'min_momentum .* got neither'),
    (lambda: LinearAnnealingMomentumUpdaterHook(min_momentum=0.5, min_momentum_ratio=0.5),
     r'got both'),
    (lambda: CyclicMomentumUpdaterHook(by_epoch=True), r'by_epoch=True is not supported'),
    (lambda: CyclicMomentumUpdaterHook(target_ratio='high'), r'target_ratio must be'),
    (lambda: OneCycleMomentumUpdaterHook(base_momentum='0.85'), r'base_momentum must be'),
    (lambda: OneCycleMomentumUpdaterHook(anneal_strategy='step'), r'anneal_strategy'),
])
def test_invalid_arguments_raise_value_error_with_a_sentence(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_paired_policies_build_in_priority_order():
    hooks = build_hooks(CASES['pair-onecycle-SGD'])
    assert [type(h).__name__ for h in hooks] == ['OneCycleLrUpdaterHook',
                                                 'OneCycleMomentumUpdaterHook']
