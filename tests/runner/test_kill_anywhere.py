"""The kill-anywhere matrix: SIGKILL a real run at a chosen moment, ``--auto-resume``, and
end bitwise where the uninterrupted run ends.

Dimensions: runner × accumulation × fp16 × eval (save_best + early stopping) × EMA ×
batch processor × processes (2**7 = 128 combinations), each killed after an iteration
(inside an accumulation window too), right after an evaluation, or inside a checkpoint
write (``kill_hook.py``). Compared: the last checkpoint's weights, optimizer, hook states
and progress, the best checkpoints (names and weights) and the ``*.log.json`` val lines.

Extra rows (``_extra_rows``) reach states the product does not: a layer unfrozen mid-run
(``unfreeze_hook.py``), EMA with ``save_best``, accumulation resumed on more processes, an
optimizer rollback under per-iteration LR and momentum schedules (``rollback_hook.py``),
DVCLive and MLflow trackers killed after logging past a mid-epoch checkpoint
(``tracker_records.py``), and sharded checkpoints (DDP; FSDP written in the background)
killed inside a write. At the end: rows for loaders the user builds
(``user_loader_job.py``, always run) and a second resume after a geometry change.

CI runs a seeded sample of ``SAMPLE`` combinations, one of them an extra row (the seed is in
each test id; set ``MTRAIN_MATRIX_SEED`` to repeat one). The whole matrix, all 128
combinations and every extra row (147 tests), about 5 minutes on 2 cores::

    MTRAIN_FULL_MATRIX=1 python -m pytest -q tests/runner/test_kill_anywhere.py
"""

import itertools
import json
import math
import os
import os.path as osp
import random
import shutil
import sys

import pytest
import torch

HERE = osp.dirname(osp.abspath(__file__))
sys.path.insert(0, HERE)  # kill_hook, imported by the runs through custom_imports
sys.path.insert(0, osp.join(osp.dirname(HERE), 'parallel'))
from dist_launch import launch  # noqa: E402
from mtrain.runner import load_checkpoint_file  # noqa: E402
from tool_loader import load_tool  # noqa: E402
from tracker_records import HOOKS as TRACKER_HOOKS, mlflow_env, tracker_records  # noqa: E402

pytestmark = pytest.mark.slow

SAMPLE = 8
DIMENSIONS = dict(runner=('Epoch', 'Iter'), accumulate=(1, 3), fp16=(False, True),
                  eval=(False, True), ema=(False, True), processor=('Basic', 'Multi'),
                  procs=(1, 2))
SEED = int(os.environ.get('MTRAIN_MATRIX_SEED', random.SystemRandom().randrange(10**6)))


def _extra_rows():
    """States the product does not reach (issue 22), each with its kill point."""
    base = dict(runner='Epoch', accumulate=3, fp16=False, eval=False, ema=False,
                processor='Basic', procs=1)
    return [
        # head[0] unfrozen at iteration 13, inside the window epoch_1.pth (iter 14) is written
        # in: its half-accumulated gradients are in the checkpoint, EMA averages it
        ({**base, 'ema': True, 'unfreeze': 13}, 'iter:20'),
        # the best file holds the EMA weights that were scored; killed after it is written
        ({**base, 'runner': 'Iter', 'accumulate': 1, 'eval': True, 'ema': True}, 'eval:2'),
        # killed on 1 process inside a window, resumed on 2: the run's end moves (7
        # iterations an epoch instead of 14) and its last window is cut there
        ({**base, 'accumulate': 4, 'resume_procs': 2}, 'iter:20'),
        # on 2 processes (7 iterations an epoch), per-iteration cosine LR and momentum, clipping:
        # a snapshot before iteration 10, in epoch_2.pth (iter 14), loaded back with
        # optimizer.load_state_dict before iteration 18; killed after iteration 20
        ({**base, 'accumulate': 1, 'procs': 2, 'snapshot': 10, 'rollback': 18}, 'iter:20'),
        # DVCLive and MLflow (file store) offline, a line every 5 iterations, checkpoints
        # every 6: killed after 22, the trackers hold step 19, past iter_18.pth (mid-epoch 2)
        ({**base, 'accumulate': 1, 'eval': True, 'tracker': True}, 'iter:22'),
        # sharded checkpoints (issue 34) of a DDP run, inside a window: killed in the second
        # save, after every rank wrote its shards, before rank 0's file and the rename
        ({**base, 'procs': 2, 'sharded': 'DDP'}, 'save:2'),
        # FSDP (sharded by default), written in the background, save_best and early
        # stopping: killed inside the third write (epoch_2.pth's, or a best checkpoint's)
        ({**base, 'accumulate': 1, 'procs': 2, 'eval': True, 'sharded': 'FSDP+async'},
         'save:3'),
    ]


def _combinations():
    combos = [dict(zip(DIMENSIONS, values)) for values in itertools.product(*DIMENSIONS.values())]
    rng = random.Random(SEED)
    if not os.environ.get('MTRAIN_FULL_MATRIX'):
        extra = [rng.choice(_extra_rows())]  # one of them in every sample
        return [(combo, _kill_point(combo, rng))
                for combo in rng.sample(combos, SAMPLE - 1)] + extra
    return [(combo, _kill_point(combo, rng)) for combo in combos] + _extra_rows()


def _kill_point(combo, rng) -> str:
    """Where to kill: after an iteration (often inside a window), an evaluation, or a save."""
    iters = 30 if combo['runner'] == 'Iter' else 4 * (14 if combo['procs'] == 1 else 7)
    kinds = ['iter', 'save'] + (['eval'] if combo['eval'] else [])
    kind = rng.choice(kinds)
    if kind == 'iter':
        return f'iter:{rng.randrange(2, iters)}'
    return f'{kind}:{rng.randint(1, 3)}'


def _config(combo, path) -> str:
    """The combination's config file: the matrix base plus its keys."""
    custom = ["dict(type='KillAtHook')"]
    lines = [f"_base_ = [{osp.join(HERE, 'kill_matrix_base.py')!r}]"]
    if combo['runner'] == 'Iter':
        lines += ["runner = dict(_delete_=True, type='IterBasedRunner', max_iters=30)",
                  'checkpoint_config = dict(interval=5)',
                  "lr_config = dict(_delete_=True, policy='step', step=[15])"]
    if combo['accumulate'] > 1:
        lines.append(f"optimizer_config = dict(type='GradientCumulativeOptimizerHook', "
                     f"cumulative_iters={combo['accumulate']})")
    if combo['fp16']:  # a dynamic scale that moves within the run
        lines.append('fp16 = dict(loss_scale=dict(init_scale=1024.0, growth_interval=4))')
    if combo['eval']:
        interval = 5 if combo['runner'] == 'Iter' else 1
        lines.append(f"evaluation = dict(interval={interval}, metric='accuracy', "
                     "save_best='accuracy')")
        custom.append("dict(type='EarlyStoppingHook', monitor='accuracy', patience=2, "
                      "min_delta=0.01)")
    if combo['ema']:
        custom.append("dict(type='EMAHook', momentum=0.1, warm_up=2)")
    if combo['processor'] == 'Multi':
        lines.append("batch_processor = dict(type='MultiBatchProcessor')")
    imports = ['kill_hook']
    if combo.get('unfreeze'):
        imports.append('unfreeze_hook')
        custom.append(f"dict(type='UnfreezeAtHook', at={combo['unfreeze']})")
    if combo.get('rollback'):
        imports.append('rollback_hook')
        lines += ["lr_config = dict(_delete_=True, policy='CosineAnnealing', min_lr=0.001, "
                  "by_epoch=False, warmup='linear', warmup_iters=4, warmup_ratio=0.1)",
                  "momentum_config = dict(policy='CosineAnnealing', min_momentum_ratio=0.5, "
                  "by_epoch=False)",
                  'optimizer_config = dict(_delete_=True, grad_clip=dict(max_norm=0.5))']
        custom.append(f"dict(type='RollbackAtHook', snapshot_at={combo['snapshot']}, "
                      f"rollback_at={combo['rollback']}, priority='HIGHEST')")
    if combo.get('sharded') == 'DDP':
        lines.append('checkpoint_config = dict(interval=1, sharded=True)')
    elif combo.get('sharded'):
        lines += ["model_wrapper = dict(type='MTFullyShardedDataParallel', shard_layers=['Linear'])",
                  'checkpoint_config = dict(interval=1, async_save=True)']
    if combo.get('tracker'):
        lines += ['checkpoint_config = dict(interval=6, by_epoch=False)',
                  "log_config = dict(interval=5, hooks=[dict(type='TextLoggerHook'), "
                  f'{TRACKER_HOOKS}])']
    lines.append(f'custom_imports = dict(imports={imports!r}, allow_failed_imports=False)')
    lines.append(f"custom_hooks = [{', '.join(custom)}]")
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    return str(path)


TRAIN = load_tool('train')  # imported once here: the forked runs start at once


@pytest.fixture(scope='module', autouse=True)
def _warm_up():
    """Import what torch imports lazily (dynamo at the first optimizer, ~4 s) before forking."""
    weight = torch.zeros(2, requires_grad=True)
    torch.optim.SGD([weight], lr=0.1).step()
    with torch.autocast('cpu', dtype=torch.float16):
        (weight * 2).sum().backward()


def _job(rank, argv, kill_at, env):
    os.environ.update(env)
    if kill_at:
        os.environ['MTRAIN_KILL_AT'] = kill_at
    code = TRAIN.main(argv)
    if code:
        raise SystemExit(f'train.py exited with {code}')


def _train(config, work_dir, procs, kill_at=None, resume=False, env=None):
    argv = [config, '--work-dir', str(work_dir)] + (['--auto-resume'] if resume else [])
    if procs > 1:
        argv += ['--launcher', 'pytorch']
    codes, _ = launch(_job, argv, kill_at, env or {}, world_size=procs, timeout=300, init=False)
    return codes


def _plain(value):
    """A checkpoint entry made comparable across work dirs (paths → file names)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, str) and os.sep in value:
        return osp.basename(value)
    return value


def _assert_equal(a, b, where):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), f'{where}: keys {sorted(a)} != {sorted(b)}'
        for k in a:
            _assert_equal(a[k], b[k], f'{where}.{k}')
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_equal(x, y, f'{where}[{i}]')
    else:
        assert a == b, f'{where}: {a!r} != {b!r}'


def _outcome(work_dir):
    """What must match: the last checkpoint, the best checkpoints, the val log lines."""
    last = load_checkpoint_file(osp.join(work_dir, 'latest.pth'))  # a file, or a sharded folder
    best = {n: load_checkpoint_file(osp.join(work_dir, n))['state_dict']
            for n in sorted(os.listdir(work_dir)) if n.startswith('best_') and n.endswith('.pth')}
    val = {}
    for name in sorted(n for n in os.listdir(work_dir) if n.endswith('.log.json')):
        with open(osp.join(work_dir, name)) as f:
            for line in map(json.loads, f):
                if line.get('mode') == 'val':  # a resumed run repeats the lost part
                    val[(line['epoch'], line['iter'])] = {
                        k: v for k, v in line.items() if k not in ('time', 'data_time', 'memory')}
    logged = {k: v for k, v in last['log_buffer']['values'].items()
              if k not in ('time', 'data_time')}  # wall-clock timings differ, of course
    return dict(last={k: _plain(last[k]) for k in ('state_dict', 'optimizer', 'hooks',
                                                   'progress')},
                logged=logged, best=best, val=val)


def _cases():
    return [pytest.param(case, id=_id(case)) for case in _combinations()]


def _id(case):
    combo, kill_at = case
    return f'seed{SEED}-' + '-'.join(f'{k}={v}' for k, v in combo.items()) + f'-kill={kill_at}'


@pytest.mark.parametrize('case', _cases())
def test_killed_and_auto_resumed_run_ends_bitwise_as_the_uninterrupted_one(tmp_path, case,
                                                                         monkeypatch):
    combo, kill_at = case
    config = _config(combo, tmp_path / 'cfg.py')
    if combo.get('resume_procs'):
        return _check_resume_on_other_procs(config, tmp_path, combo, kill_at)
    if combo.get('tracker'):
        return _check_trackers(config, tmp_path, kill_at, monkeypatch)
    reference, run, procs = tmp_path / 'reference', tmp_path / 'run', combo['procs']
    assert _train(config, reference, procs) == [0] * procs
    codes = _train(config, run, procs, kill_at)
    assert set(codes) <= {0, -9}, codes  # killed, or finished before the kill point
    assert _train(config, run, procs, resume=True) == [0] * procs
    _assert_equal(_outcome(run), _outcome(reference), 'outcome')
    if combo.get('rollback'):
        _check_schedules_followed_the_rollback(reference)


def _check_resume_on_other_procs(config, tmp_path, combo, kill_at):
    """Killed, then resumed on ``resume_procs`` processes: as a clean resume from the same file.

    No run on one process count is the reference here; the clean resume (the
    checkpoint the killed run left, copied to a fresh folder) is, and the
    update count is the windows' by hand: epoch_1.pth (iteration 14 of 1 x 14
    an epoch) holds 3 updates and the half window [12, 16); 3 more epochs of 7
    iterations end the run at 35: windows ending at 15, 19, ..., 31 and [32, 35).
    (A stored max_iters, 4 x 7 = 28, divided iterations 28-34 by 0.)
    """
    run, clean = tmp_path / 'run', tmp_path / 'clean'
    assert set(_train(config, run, combo['procs'], kill_at)) <= {0, -9}
    name = osp.basename(os.readlink(run / 'latest.pth'))
    clean.mkdir()
    shutil.copy(run / name, clean / name)
    os.symlink(name, clean / 'latest.pth')
    procs = combo['resume_procs']
    assert _train(config, run, procs, resume=True) == [0] * procs
    assert _train(config, clean, procs, resume=True) == [0] * procs
    outcome = _outcome(run)
    _assert_equal(outcome, _outcome(clean), 'outcome')
    assert name == 'epoch_1.pth' and outcome['last']['progress']['num_updates'] == 9
    assert all(torch.isfinite(v).all() for v in outcome['last']['state_dict'].values())


def _check_schedules_followed_the_rollback(work_dir):
    """After ``optimizer.load_state_dict`` the schedules wrote into the new param groups.

    The run's last iteration (27 of 28) ran at the cosine values for 27/28; a
    schedule still writing into the groups the rollback replaced would have
    left the snapshot's values (iteration 10's) there.
    """
    [group] = torch.load(work_dir / 'latest.pth', weights_only=True)['optimizer']['param_groups']
    cosine = [end + (start - end) * (math.cos(math.pi * 27 / 28) + 1) / 2
              for start, end in ((0.05, 0.001), (0.9, 0.45))]
    assert [group['lr'], group['momentum']] == pytest.approx(cosine, rel=1e-12)


def _check_trackers(config, tmp_path, kill_at, monkeypatch):
    """Killed mid-epoch after the trackers logged past the last checkpoint, auto-resumed: each
    step is held once, with the uninterrupted run's values (all of them, as written)."""
    reference, run = tmp_path / 'reference', tmp_path / 'run'
    pytest.importorskip('dvclive')  # (imported here, before the runs fork: once)
    pytest.importorskip('mlflow')
    monkeypatch.setenv('MLFLOW_ALLOW_FILE_STORE', 'true')  # MLflow 3, here and in the runs
    assert _train(config, reference, 1, env=mlflow_env(reference)) == [0]
    assert _train(config, run, 1, kill_at, env=mlflow_env(run)) == [-9]
    assert osp.basename(os.readlink(run / 'latest.pth')) == 'iter_18.pth'
    for record in tracker_records(run, finished=False).values():  # logged past iter_18.pth
        assert record['train/loss'][-1][0] == 19
    assert _train(config, run, 1, resume=True, env=mlflow_env(run)) == [0]
    outcomes = [_outcome(run), _outcome(reference)]
    for outcome in outcomes:  # MLflow's run id is new in each work dir (one run in each)
        outcome['last']['hooks'].pop('MlflowLoggerHook')
    _assert_equal(*outcomes, 'outcome')
    assert tracker_records(run) == tracker_records(reference)


# -- loaders the user built (issue 26) and a second resume after a geometry change ----------
# Python API jobs (tests/runner/user_loader_job.py): the user's own DataLoader handed to
# runner.run, SIGKILLed mid-pass and resumed from the latest checkpoint. Compared: the
# samples each rank saw at each iteration, and the final weights, bitwise.
from user_loader_job import SAMPLES, job as user_job, seen as user_seen  # noqa: E402

USER_ROWS = [(runner, sampler, procs) for runner in ('Epoch', 'Iter')
             for sampler in ('shuffle', 'set_epoch') for procs in (1, 2)]


def _user_run(work_dir, out, procs, **spec):
    os.makedirs(out, exist_ok=True)
    spec = dict(spec, work_dir=str(work_dir), out=str(out))
    codes, _ = launch(user_job, spec, world_size=procs, timeout=120)
    return codes


@pytest.mark.parametrize('runner,sampler,procs', USER_ROWS)
def test_user_built_loader_killed_mid_pass_resumes_bitwise(tmp_path, runner, sampler, procs):
    per_pass = SAMPLES // 8 // (procs if sampler == 'set_epoch' else 1)  # 12 or 6 batches
    length = 2 if runner == 'Epoch' else 2 * per_pass + 2
    spec = dict(runner=runner, sampler=sampler, batch=8, length=length, interval=4)
    kill_at = per_pass + 7 if per_pass == 12 else per_pass + 5  # after a checkpoint mid-pass 1
    assert _user_run(tmp_path / 'ref', tmp_path / 'ref', procs, **spec) == [0] * procs
    assert set(_user_run(tmp_path / 'run', tmp_path / 'run', procs, kill_at=kill_at,
                         **spec)) == {-9}
    assert _user_run(tmp_path / 'run', tmp_path / 'run', procs, resume=True,
                     **spec) == [0] * procs
    assert user_seen(tmp_path / 'run', procs) == user_seen(tmp_path / 'ref', procs)
    for a, b in zip(torch.load(tmp_path / 'run' / 'final.pth').values(),
                    torch.load(tmp_path / 'ref' / 'final.pth').values()):
        assert torch.equal(a, b)


@pytest.mark.parametrize('runner', ['Epoch', 'Iter'])
def test_user_built_loaders_with_a_val_phase_killed_resume_bitwise(tmp_path, runner):
    # workflow [('train', 1), ('val', 1)] on 2 processes, both loaders without a generator
    # (issue 33): killed mid-pass 1, after epoch_1.pth (written before epoch 0's val pass) or
    # after iter_16.pth (before the val iteration that follows it).
    spec = dict(runner=runner, sampler='shuffle', batch=8, val=True,
                length=2 if runner == 'Epoch' else 26, interval=1 if runner == 'Epoch' else 4)
    assert _user_run(tmp_path / 'ref', tmp_path / 'ref', 2, **spec) == [0, 0]
    assert set(_user_run(tmp_path / 'run', tmp_path / 'run', 2, kill_at=19, **spec)) == {-9}
    assert _user_run(tmp_path / 'run', tmp_path / 'run', 2, resume=True, **spec) == [0, 0]
    assert user_seen(tmp_path / 'run', 2) == user_seen(tmp_path / 'ref', 2)
    for a, b in zip(torch.load(tmp_path / 'run' / 'final.pth').values(),
                    torch.load(tmp_path / 'ref' / 'final.pth').values()):
        assert torch.equal(a, b)


@pytest.mark.parametrize('runner', ['Epoch', 'Iter'])
def test_second_resume_after_a_geometry_change_sees_each_sample_once(tmp_path, runner):
    # 96 samples, mtrain's sampler. 2 processes x 8 until iteration 2 (32 samples), resumed
    # on 1 process x 12 until iteration 4 (24 more: at sample 56, not a multiple of 12),
    # resumed again on 2 processes x 8 to the end of the epoch (40 more).
    spec = dict(runner=runner, sampler='mtrain', length=1 if runner == 'Epoch' else 7,
                interval=1)
    work = tmp_path / 'work'
    assert set(_user_run(work, tmp_path / 'a', 2, batch=8, kill_at=3, **spec)) == {-9}
    assert set(_user_run(work, tmp_path / 'b', 1, batch=12, kill_at=5, resume=True,
                         **spec)) == {-9}
    assert _user_run(work, tmp_path / 'c', 2, batch=8, resume=True, **spec) == [0, 0]
    segments = [('a', 2, range(0, 2)), ('b', 1, range(2, 4)), ('c', 2, range(4, 7))]
    epoch0 = []
    for name, procs, iters in segments:
        for (_, it), (epoch, idx) in user_seen(tmp_path / name, procs).items():
            if it in iters:
                assert epoch == 0
                epoch0 += idx
    assert sorted(epoch0) == list(range(SAMPLES))  # every sample once, none twice
