"""LR updater hooks: mmcv 1.7.2's numbers, under both runners, counting iterations as mmcv."""

import math

import pytest
import torch
from schedule_driver import (build_hooks, column, drive_epochs, drive_iters, load_golden,
                             make_optimizer, make_runner, run_case)

from mtrain.hooks import GradientCumulativeOptimizerHook, Hook
from mtrain.hooks import lr_updater
from mtrain.hooks.lr_updater import (CosineAnnealingLrUpdaterHook, CosineRestartLrUpdaterHook,
                                     CyclicLrUpdaterHook, FixedLrUpdaterHook,
                                     FlatCosineAnnealingLrUpdaterHook,
                                     LinearAnnealingLrUpdaterHook, LrUpdaterHook,
                                     OneCycleLrUpdaterHook, PolyLrUpdaterHook, StepLrUpdaterHook)
from mtrain.hooks.momentum_updater import CosineAnnealingMomentumUpdaterHook
from mtrain.registry import HOOKS
from mtrain.runner.training_hooks import build_training_hooks
from mtrain.utils.errors import ConfigError

GOLDEN = load_golden('lr')
LAYOUT = GOLDEN['layout']  # 5 epochs of 7 iterations
CASES = {case['id']: case for case in GOLDEN['cases']}
ACCUMULATION = GOLDEN['accumulation']
ACC_CASES = {case['id']: case for case in ACCUMULATION['cases']}


def approx(expected):
    return [pytest.approx(row, rel=1e-12, abs=0) for row in expected]


def lrs(hook, driver='epoch', max_epochs=5, epoch_len=7, cumulative_iters=1, optimizer='SGD'):
    runner = make_runner(make_optimizer(optimizer), max_epochs if driver == 'epoch' else None,
                         epoch_len, max_epochs * epoch_len, cumulative_iters)
    if driver == 'epoch':
        return column(drive_epochs(runner, [hook], max_epochs), 'lr')
    return column(drive_iters(runner, [hook]), 'lr')


# -- golden sequences from mmcv 1.7.2 -----------------------------------------
@pytest.mark.parametrize('case_id', sorted(CASES))
def test_matches_mmcv(case_id):
    """Every policy × warmup × by_epoch: mmcv's lr at every iteration.

    The same numbers come out of an IterBasedRunner-style drive (mmcv itself
    never updates a by-epoch schedule there) and with 3 iterations per
    optimizer update: as in mmcv, the schedule counts iterations.
    """
    case = CASES[case_id]
    expected = approx(case['lr'])
    assert column(run_case(case, LAYOUT, 'epoch'), 'lr') == expected
    assert column(run_case(case, LAYOUT, 'iter'), 'lr') == expected, 'IterBasedRunner drive'
    assert column(run_case(case, LAYOUT, 'epoch', cumulative_iters=3), 'lr') == expected


@pytest.mark.parametrize('case_id', sorted(ACC_CASES))
def test_matches_mmcv_under_accumulation_and_skipped_steps(case_id):
    """mmcv's lr at every iteration while updates come every 2 or 4 iterations, some skipped."""
    case = ACC_CASES[case_id]
    assert case['cumulative_iters'] > 1
    record = run_case(case, ACCUMULATION['layout'], 'epoch')
    assert column(record, 'lr') == approx(case['lr'])


def test_golden_fixtures_cover_every_policy_and_warmup():
    policies = {case['lr_config']['type'] for case in CASES.values()}
    assert policies == set(lr_updater.__all__) - {'LrUpdaterHook'}
    assert all(HOOKS.get(name) is getattr(lr_updater, name) for name in policies)
    warmups = {(c['lr_config'].get('warmup'), c['lr_config'].get('warmup_by_epoch', False),
                c['lr_config'].get('by_epoch', False)) for c in CASES.values()}
    assert len(warmups) == 2 * (1 + 3 * 2)  # by_epoch × (none + 3 types × by-iter/by-epoch)


# -- names, priority, stages --------------------------------------------------
@pytest.mark.parametrize('policy, cls', [
    ('fixed', FixedLrUpdaterHook), ('step', StepLrUpdaterHook), ('poly', PolyLrUpdaterHook),
    ('CosineAnnealing', CosineAnnealingLrUpdaterHook),
    ('FlatCosineAnnealing', FlatCosineAnnealingLrUpdaterHook),
    ('CosineRestart', CosineRestartLrUpdaterHook), ('Cyclic', CyclicLrUpdaterHook),
    ('OneCycle', OneCycleLrUpdaterHook), ('LinearAnnealing', LinearAnnealingLrUpdaterHook)])
def test_policy_name_selects_the_class(policy, cls):
    name = (policy.title() if policy == policy.lower() else policy) + 'LrUpdaterHook'
    assert HOOKS.get(name) is cls


def test_lr_config_builds_through_the_training_hooks_builder():
    [(hook, priority)] = build_training_hooks(lr_config=dict(policy='step', step=[2, 4]),
                                              timer_config=None)
    assert type(hook) is StepLrUpdaterHook and hook.step == [2, 4]
    assert priority == 'VERY_HIGH' == StepLrUpdaterHook.priority


def test_hook_runs_only_at_its_three_stages():
    assert FixedLrUpdaterHook().triggered_stages() == [
        'before_run', 'before_train_epoch', 'before_train_iter']


# -- quirks kept from mmcv ----------------------------------------------------
def test_step_min_lr_is_an_absolute_floor_for_every_group():
    lr = lrs(StepLrUpdaterHook(step=1, gamma=0.1, min_lr=0.004))
    assert lr[0] == [0.1, 0.01]
    assert lr[7] == pytest.approx([0.01, 0.004])  # group 1 would be 0.001
    assert lr[-1] == [0.004, 0.004]


def test_by_epoch_warmup_scales_each_epochs_regular_lr():
    # Warmup spans the step at epoch 1: from iteration 7 on it ramps towards 0.01.
    lr = lrs(StepLrUpdaterHook(step=1, warmup='constant', warmup_iters=10, warmup_ratio=0.5))
    assert [row[0] for row in lr[5:12]] == pytest.approx(
        [0.05, 0.05, 0.005, 0.005, 0.005, 0.01, 0.01])


def test_one_cycle_float_max_lr_gives_every_group_the_same_lr():
    lr = lrs(OneCycleLrUpdaterHook(max_lr=0.5, pct_start=0.4))  # peak at update 13
    assert all(a == b for a, b in lr)
    assert lr[0][0] == pytest.approx(0.5 / 25) and max(a for a, _ in lr) == pytest.approx(0.5)


def test_one_cycle_raises_when_total_steps_is_shorter_than_the_run():
    with pytest.raises(ValueError, match=r'total_steps \(30\) is shorter than the run '
                                         r'\(35 iterations\)'):
        lrs(OneCycleLrUpdaterHook(max_lr=0.5, total_steps=30))


def test_one_cycle_total_steps_counts_iterations_not_updates():
    # 70 iterations at 2 per update: mmcv's total_steps is in iterations, so 35 is too short.
    with pytest.raises(ValueError, match=r'total_steps \(35\) is shorter than the run'):
        lrs(OneCycleLrUpdaterHook(max_lr=0.5, total_steps=35), cumulative_iters=2,
            epoch_len=14)
    lr = lrs(OneCycleLrUpdaterHook(max_lr=0.5, total_steps=70), cumulative_iters=2,
             epoch_len=14)
    assert lr[-1][0] == pytest.approx(0.5 / 25 / 1e4)


# -- iterations, not updates (mmcv's numbers) -------------------------------------
def test_step_milestone_in_iterations_decays_under_accumulation():
    """Issue 14's config, scaled down: step=[60] in an 80-iteration run, 2 iterations per
    update. Counting updates, the run never reached 60; mmcv decays at iteration 60."""
    lr = lrs(StepLrUpdaterHook(step=[60], by_epoch=False), epoch_len=16, max_epochs=5,
             cumulative_iters=2)
    assert [row[0] for row in lr] == [0.1] * 60 + [pytest.approx(0.01)] * 20


def test_warmup_by_epoch_counts_iterations_per_epoch():
    hook = LinearAnnealingLrUpdaterHook(min_lr=0, by_epoch=False, warmup='linear',
                                        warmup_iters=1, warmup_by_epoch=True)
    lrs(hook, epoch_len=6, cumulative_iters=4, max_epochs=2)
    assert hook.warmup_iters == 6  # one epoch of 6 iterations, as mmcv (len(data_loader))


@pytest.mark.parametrize('hook, end', [
    (PolyLrUpdaterHook(power=0.5, min_lr=1e-3, by_epoch=False), 1e-3),
    (CosineAnnealingLrUpdaterHook(min_lr=1e-3, by_epoch=False), 1e-3),
    (LinearAnnealingLrUpdaterHook(min_lr_ratio=0.1, by_epoch=False), 0.01),
    (FlatCosineAnnealingLrUpdaterHook(min_lr=1e-3, by_epoch=False), 1e-3),
    (OneCycleLrUpdaterHook(max_lr=0.1), 0.1 / 25 / 1e4)])
def test_schedules_stop_at_their_end_when_iterations_overshoot(hook, end):
    runner = make_runner(make_optimizer(), 5, 7, 35)
    hook.before_run(runner)
    runner.iter = 50  # more iterations than planned (e.g. resumed with another length)
    hook.before_train_iter(runner)
    lr = runner.optimizer.param_groups[0]['lr']
    assert isinstance(lr, float) and lr == pytest.approx(end)


def test_cyclic_stays_in_its_last_cycle_past_the_end():
    runner = make_runner(make_optimizer(), 5, 7, 35)
    hook = CyclicLrUpdaterHook()
    hook.before_run(runner)
    runner.iter = 34
    hook.before_train_iter(runner)
    last = runner.optimizer.param_groups[0]['lr']
    runner.iter = 40
    hook.before_train_iter(runner)
    assert runner.optimizer.param_groups[0]['lr'] == last


# -- IterBasedRunner: no before_train_epoch -----------------------------------
def test_by_epoch_schedule_changes_at_epoch_boundaries_under_iter_runner():
    lr = lrs(StepLrUpdaterHook(step=1, gamma=0.5), driver='iter', max_epochs=3, epoch_len=4)
    assert [row[0] for row in lr] == [0.1] * 4 + [0.05] * 4 + [0.025] * 4


def test_by_epoch_cosine_under_iter_runner_uses_iterations_for_the_run_length():
    lr = lrs(CosineAnnealingLrUpdaterHook(min_lr=0), driver='iter', max_epochs=4, epoch_len=5)
    assert [row[0] for row in lr[::5]] == pytest.approx(
        [0.1 * 0.5 * (1 + math.cos(math.pi * e / 4)) for e in range(4)])


def test_warmup_by_epoch_under_iter_runner():
    hook = FixedLrUpdaterHook(by_epoch=False, warmup='linear', warmup_iters=1,
                              warmup_ratio=0.5, warmup_by_epoch=True)
    lr = lrs(hook, driver='iter', max_epochs=2, epoch_len=4)
    assert [row[0] for row in lr] == pytest.approx(
        [0.05, 0.0625, 0.075, 0.0875, 0.1, 0.1, 0.1, 0.1])


class _Record(Hook):
    def __init__(self):
        self.rows = []

    def before_train_iter(self, runner):
        group = runner.optimizer.param_groups[0]
        self.rows.append((runner.num_updates, group['lr'], group['momentum']))


@pytest.mark.parametrize('by_epoch', [True, False], ids=['EpochBasedRunner', 'IterBasedRunner'])
def test_real_runners_agree_with_accumulation(make_runner, toy_loader, by_epoch):
    # 8 batches an epoch, 2 per update: 4 updates an epoch, 12 in all; the schedules
    # follow the 24 iterations (mmcv), the update count only advances every 2.
    runner = make_runner(by_epoch=by_epoch, max_len=3 if by_epoch else 24, momentum=0.9)
    runner.register_hook(GradientCumulativeOptimizerHook(cumulative_iters=2))
    runner.register_hook(StepLrUpdaterHook(step=1, gamma=0.5, warmup='linear', warmup_iters=1,
                                           warmup_ratio=0.5, warmup_by_epoch=True))
    runner.register_hook(CosineAnnealingMomentumUpdaterHook(min_momentum_ratio=0.5,
                                                            by_epoch=False))
    record = _Record()
    runner.register_hook(record)
    runner.run([toy_loader], [('train', 1)])
    assert [u for u, _, _ in record.rows] == [i // 2 for i in range(24)]
    warmup = [0.1 * (1 - (1 - i / 8) * 0.5) for i in range(8)]  # one epoch, by iteration
    # Under IterBasedRunner runner.epoch (which a by-epoch step follows) moves at the second
    # iteration of a pass: mmcv 1.7.2 reads it before fetching the batch.
    steps = [0.05] * 8 + [0.025] * 8 if by_epoch else [0.1] + [0.05] * 8 + [0.025] * 7
    assert [lr for _, lr, _ in record.rows] == pytest.approx(warmup + steps)
    assert record.rows[-1][2] == pytest.approx(
        0.45 + 0.225 * (1 + math.cos(math.pi * 23 / 24)))


# -- resume, several optimizers -------------------------------------------------
def test_resume_schedules_from_initial_lr_kept_in_the_optimizer():
    case = CASES['CosineAnnealing9-iter-linear']
    optimizer = make_optimizer()
    runner = make_runner(optimizer, 5, 7, 35)
    [hook] = build_hooks(case)
    hook.before_run(runner)
    for _ in range(20):  # 20 updates, then "save"
        hook.before_train_iter(runner)
        runner.num_updates += 1
        runner.iter += 1
    resumed = make_optimizer()
    resumed.load_state_dict(optimizer.state_dict())  # carries initial_lr, lr is mid-schedule
    runner.optimizer = resumed
    [fresh] = build_hooks(case)
    fresh.before_run(runner)
    assert fresh.base_lr == [0.1, 0.01]
    fresh.before_train_iter(runner)
    assert [g['lr'] for g in resumed.param_groups] == pytest.approx(case['lr'][20], rel=1e-12)


def test_dict_of_optimizers_is_scheduled_per_optimizer():
    optimizers = dict(gen=make_optimizer('SGD'), disc=make_optimizer('Adam'))
    runner = make_runner(optimizers, 5, 7, 35)
    runner.data_loader = [None] * 7
    hook = OneCycleLrUpdaterHook(max_lr=dict(gen=0.5, disc=[0.1, 0.2]))
    hook.before_run(runner)
    hook.before_train_iter(runner)
    assert [g['lr'] for g in optimizers['gen'].param_groups] == pytest.approx([0.02, 0.02])
    assert [g['lr'] for g in optimizers['disc'].param_groups] == pytest.approx([0.004, 0.008])
    assert set(hook.base_lr) == {'gen', 'disc'}


# -- invalid arguments -------------------------------------------------------
@pytest.mark.parametrize('make, match', [
    (lambda: FixedLrUpdaterHook(warmup='cosine', warmup_iters=5),
     r"warmup must be 'constant', 'linear', 'exp' or None"),
    (lambda: FixedLrUpdaterHook(warmup='linear', warmup_iters=5, warmup_ratio=0),
     r'warmup_ratio must be in \(0, 1\]'),
    (lambda: FixedLrUpdaterHook(warmup='linear', warmup_iters=5, warmup_ratio=1.5),
     r'warmup_ratio must be in \(0, 1\]'),
    (lambda: FixedLrUpdaterHook(warmup='exp', warmup_iters=0),
     r'warmup_iters must be a positive number'),
    (lambda: CosineAnnealingLrUpdaterHook(),
     r'needs exactly one of min_lr .* and min_lr_ratio .*, got neither\.'),
    (lambda: CosineAnnealingLrUpdaterHook(min_lr=0, min_lr_ratio=0.1), r'got both\.'),
    (lambda: LinearAnnealingLrUpdaterHook(), r'got neither'),
    (lambda: FlatCosineAnnealingLrUpdaterHook(start_percent=1.5, min_lr=0),
     r'start_percent must be a number between 0 and 1'),
    (lambda: CosineRestartLrUpdaterHook(periods=[5, 5], restart_weights=[1], min_lr=0),
     r'must have the same length'),
    (lambda: StepLrUpdaterHook(step=[2, 0]), r'every entry of step must be a positive'),
    (lambda: StepLrUpdaterHook(step=0), r'step must be a positive integer'),
    (lambda: CyclicLrUpdaterHook(by_epoch=True), r'by_epoch=True is not supported'),
    (lambda: CyclicLrUpdaterHook(step_ratio_up=1.0), r'step_ratio_up must be in \[0, 1\)'),
    (lambda: OneCycleLrUpdaterHook(max_lr=0.1, by_epoch=True), r'by_epoch=True'),
    (lambda: OneCycleLrUpdaterHook(max_lr=0.1, anneal_strategy='cosine'),
     r"anneal_strategy must be 'cos' or 'linear'"),
    (lambda: OneCycleLrUpdaterHook(max_lr=0.1, pct_start=1.2), r'pct_start must be'),
    (lambda: OneCycleLrUpdaterHook(max_lr='0.1'), r'max_lr must be a number'),
])
def test_invalid_arguments_raise_value_error_with_a_sentence(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_step_of_wrong_type_raises_type_error():
    with pytest.raises(TypeError, match='step must be an int .* or a list of ints'):
        StepLrUpdaterHook(step='8')


def test_max_lr_list_must_match_the_param_groups():
    with pytest.raises(ValueError, match='max_lr has 3 values but optimizer SGD has 2'):
        lrs(OneCycleLrUpdaterHook(max_lr=[0.1, 0.2, 0.3]))


def test_cosine_restart_periods_shorter_than_the_run_say_so():
    with pytest.raises(ValueError, match='past the end of the periods'):
        lrs(CosineRestartLrUpdaterHook(periods=[2, 2], min_lr=0))


def test_config_error_names_the_config_key():
    with pytest.raises(ConfigError, match='lr_config.*got neither'):
        build_training_hooks(lr_config=dict(policy='CosineAnnealing'), timer_config=None)


def test_base_class_needs_a_policy():
    with pytest.raises(NotImplementedError, match='must implement get_lr'):
        lrs(LrUpdaterHook())


def test_lr_is_a_python_float_not_a_tensor():
    lr = lrs(PolyLrUpdaterHook(by_epoch=False))
    assert all(type(v) is float for row in lr for v in row)
    assert not any(isinstance(v, torch.Tensor) for row in lr for v in row)


class _TwoOptimizerModel(torch.nn.Module):
    """GAN-style: the model steps its own two optimizers (no OptimizerHook)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.gen = torch.nn.Linear(4, 4)
        self.disc = torch.nn.Linear(4, 1)
        self.optimizers = None  # set once the optimizers exist

    def forward(self, img, gt_label=None):
        losses = {}
        for name, loss_of in (('disc', lambda: self.disc(self.gen(img).detach()).mean()),
                              ('gen', lambda: -self.disc(self.gen(img)).mean())):
            optimizer = self.optimizers[name]
            optimizer.zero_grad()
            loss = loss_of()
            loss.backward()
            optimizer.step()
            losses[f'loss_{name}'] = loss.detach()
        return losses


class _RecordDict(Hook):
    def __init__(self):
        self.rows = []

    def before_train_iter(self, runner):
        self.rows.append({name: [(g['lr'], g.get('momentum', g.get('betas', (None,))[0]))
                                 for g in optimizer.param_groups]
                          for name, optimizer in runner.optimizer.items()})


@pytest.mark.parametrize('by_epoch', [True, False], ids=['EpochBasedRunner', 'IterBasedRunner'])
def test_dict_of_optimizers_stepped_by_the_model_follows_the_iterations(make_runner, toy_loader,
                                                                         by_epoch):
    """mmcv's LrUpdaterHook with ``runner.optimizer`` a dict: each optimizer's groups from
    their own initial values, advancing with iterations although no OptimizerHook runs."""
    model = _TwoOptimizerModel()
    optimizers = dict(gen=torch.optim.SGD(model.gen.parameters(), lr=0.1, momentum=0.9),
                      disc=torch.optim.Adam(model.disc.parameters(), lr=0.01,
                                            betas=(0.5, 0.999)))
    model.optimizers = optimizers
    runner = make_runner(model=model, by_epoch=by_epoch, max_len=2 if by_epoch else 16)
    runner.optimizer = optimizers
    lr_hook = StepLrUpdaterHook(step=[10], by_epoch=False, warmup='linear', warmup_iters=4,
                                warmup_ratio=0.5)
    momentum_hook = CosineAnnealingMomentumUpdaterHook(min_momentum_ratio=0.5, by_epoch=False)
    record = _RecordDict()
    for hook in (lr_hook, momentum_hook, record):
        runner.register_hook(hook)
    runner.run([toy_loader], [('train', 1)])
    assert runner.num_updates == 0  # no OptimizerHook: the schedules still moved
    warmup = [1 - (1 - i / 4) * 0.5 for i in range(4)]
    factors = warmup + [1.] * 6 + [0.1] * 6
    for name, base_lr, base_momentum in (('gen', 0.1, 0.9), ('disc', 0.01, 0.5)):
        lrs = [row[name][0][0] for row in record.rows]
        momenta = [row[name][0][1] for row in record.rows]
        assert lrs == pytest.approx([base_lr * f for f in factors])
        assert momenta == pytest.approx(
            [base_momentum * (0.5 + 0.25 * (1 + math.cos(math.pi * i / 16))) for i in range(16)])
    assert lr_hook.base_lr == dict(gen=[0.1], disc=[0.01])
    assert momentum_hook.regular_momentum['disc'] == pytest.approx(
        [0.5 * (0.5 + 0.25 * (1 + math.cos(math.pi * 15 / 16)))])


# -- a by-iteration policy is asked each iteration, with the real runner ----------------
def _as_user_policy(hook):
    """Turn ``hook`` into what a user's subclass overriding ``get_lr`` is; return its calls."""
    policy = type(hook)
    calls = []

    def get_lr(self, runner, base_lr):
        calls.append(runner)
        return policy.get_lr(self, runner, base_lr)

    hook.__class__ = type(f'User{policy.__name__}', (policy,),
                          {'get_lr': get_lr, '__module__': __name__})
    return calls


@pytest.mark.parametrize('case_id', sorted(c for c in CASES if not CASES[c]['lr_config'].get(
    'by_epoch', True)))
def test_a_users_subclass_gives_the_numbers_of_mtrains_policy(case_id):
    """Bitwise, under both runners' drives: mtrain's policies and the same policy as
    a user's subclass, which sees the real runner at every iteration."""
    case = CASES[case_id]
    for driver in ('epoch', 'iter'):
        runs = []
        for as_user in (False, True):
            runner = make_runner(make_optimizer(case['optimizer']), LAYOUT['max_epochs'] if
                                 driver == 'epoch' else None, LAYOUT['epoch_len'],
                                 LAYOUT['max_iters'])
            [hook] = build_hooks(case)
            calls = _as_user_policy(hook) if as_user else None
            record = drive_epochs(runner, [hook], LAYOUT['max_epochs']) if driver == 'epoch' \
                else drive_iters(runner, [hook])
            runs.append((hook, column(record, 'lr'), calls, runner))
        (_, builtin, _, _), (_, asked, calls, runner) = runs
        assert builtin == asked, driver  # exact, not approx
        assert calls and all(seen is runner for seen in calls)


def test_a_jump_of_the_iteration_count_gets_the_values_of_where_it_is():
    """A resumed run (or any jump of runner.iter) gets the values of where it is."""
    hook = CosineAnnealingLrUpdaterHook(min_lr=0., by_epoch=False, warmup='linear',
                                        warmup_iters=10)
    runner = make_runner(make_optimizer(), None, 7, 1000)
    hook.before_run(runner)
    seen = {}
    for it in list(range(0, 300)) + [5, 6, 999, 998, 500]:
        runner.iter = it
        hook.before_train_iter(runner)
        seen.setdefault(it, []).append(runner.optimizer.param_groups[0]['lr'])
    assert all(len(set(v)) == 1 for v in seen.values())  # the same value however reached
    expected = [0.5 * 0.1 * (1 + math.cos(math.pi * it / 1000)) for it in (500, 998, 999)]
    assert [seen[it][0] for it in (500, 998, 999)] == pytest.approx(expected, rel=1e-12)
    assert seen[5][0] == pytest.approx(0.1 * (1 - (1 - 0.1) * (1 - 5 / 10)) * 0.5 * (
        1 + math.cos(math.pi * 5 / 1000)), rel=1e-12)
