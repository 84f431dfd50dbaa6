"""Which worker runs which trial, on a real SQLite study and real file locks."""

import os
import subprocess
import sys

import optuna

from mtrain.sweep import SweepSpec, choice, intrange, loguniform, uniform
from mtrain.sweep.claims import _adopt, claim_trial
from mtrain.sweep.study import build_sampler, open_study
from mtrain.sweep.sweeper import Sweeper
from sweep_helpers import CONFIG

SPACE = {'optimizer.lr': loguniform(0.01, 0.1)}
HOLD = ('import fcntl, os, sys\nfd = os.open(sys.argv[1], os.O_RDWR)\n'
        'fcntl.flock(fd, fcntl.LOCK_EX)\nprint("locked", flush=True)\nsys.stdin.readline()')


def _study(tmp_path):
    return optuna.create_study(storage=f'sqlite:///{tmp_path}/s.db', study_name='s')


def test_new_trials_until_the_study_is_full_then_none(tmp_path):
    study = _study(tmp_path)
    first = claim_trial(study, str(tmp_path), SPACE, total=2)
    second = claim_trial(study, str(tmp_path), SPACE, total=2)
    assert (first.number, second.number, first.adopted) == (0, 1, False)
    assert first.work_dir == os.path.join(str(tmp_path), 'trial_0000')
    assert study.trials[0].user_attrs['work_dir'] == first.work_dir
    assert 0.01 <= first.params['optimizer.lr'] <= 0.1
    # Both still held by this worker: nothing to adopt, and the study is full.
    assert claim_trial(study, str(tmp_path), SPACE, total=2) is None


def test_a_running_trial_whose_lock_is_free_is_adopted_once(tmp_path):
    study = _study(tmp_path)
    claim = claim_trial(study, str(tmp_path), SPACE, total=1)
    claim.lock.release()  # its worker died
    adopted = claim_trial(study, str(tmp_path), SPACE, total=1)
    assert adopted.adopted and adopted.number == 0 and adopted.params == claim.params
    assert claim_trial(study, str(tmp_path), SPACE, total=1) is None  # now held again
    adopted.lock.release()
    study.tell(0, 0.5)
    assert claim_trial(study, str(tmp_path), SPACE, total=1) is None  # finished: kept


def test_a_trial_finished_after_the_list_was_read_is_not_adopted(tmp_path):
    # Two workers on one folder: one read the trials (#0 RUNNING); the other then told the
    # study #0 is complete and let go of its lock. The first must not take #0 up again
    # (it did, and its own tell failed with UpdateFinishedTrialError).
    study = _study(tmp_path)
    claim = claim_trial(study, str(tmp_path), SPACE, total=1)
    stale = study.get_trials(deepcopy=False)[0]
    study.tell(0, 0.5)
    claim.lock.release()
    assert _adopt(study, stale, str(tmp_path)) is None
    assert claim_trial(study, str(tmp_path), SPACE, total=1) is None


def test_a_lock_held_by_another_process_is_respected(tmp_path):
    study = _study(tmp_path)
    claim = claim_trial(study, str(tmp_path), SPACE, total=1)
    claim.lock.release()
    # Another process holds it, as a training run holds its inherited copy of the lock.
    holder = subprocess.Popen([sys.executable, '-c', HOLD, os.path.join(claim.work_dir, '.lock')],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert holder.stdout.readline() == b'locked\n'
    try:
        assert claim_trial(study, str(tmp_path), SPACE, total=1) is None
    finally:
        holder.communicate(b'\n', timeout=60)
    assert claim_trial(study, str(tmp_path), SPACE, total=1).adopted


def test_a_trial_whose_folder_this_machine_cannot_see_is_left_alone(tmp_path):
    study = _study(tmp_path)
    trial = study.ask()
    trial.set_user_attr('work_dir', str(tmp_path / 'elsewhere' / 'trial_0000'))
    assert claim_trial(study, str(tmp_path), SPACE, total=1) is None


def test_workers_sharing_a_study_draw_different_values(tmp_path):
    # Two workers (two connections to one study, each with its sampler, both seeded with
    # --seed): their random draws started at the same state, so trials 0 and 1 were equal.
    spec = SweepSpec(config=CONFIG, space_file='s.py', space=SPACE, work_dir=str(tmp_path),
                     trials=4, study='w', metric='accuracy', direction='maximize')
    workers = [open_study(spec), open_study(spec)]
    lrs = []
    for number in range(4):
        claim = claim_trial(workers[number % 2], str(tmp_path), SPACE, total=4,
                            sampler_for=lambda trials: build_sampler(spec, trials))
        lrs.append(claim.params['optimizer.lr'])
    assert len(set(lrs)) == 4


def test_the_grid_sampler_gives_each_point_once_and_its_end_is_no_error(tmp_path):
    space = {'optimizer.momentum': uniform(0.1, 0.3, step=0.1),
             'lr_config.warmup_iters': intrange(0, 10, step=10), 'optimizer.nesterov': choice(True)}
    spec = SweepSpec(config=CONFIG, space_file='s.py', space=space, work_dir=str(tmp_path),
                     trials=6, study='g', metric='accuracy', direction='maximize',
                     sampler='grid')
    study = open_study(spec)
    sweeper = Sweeper(spec, study)
    seen = set()
    for _ in range(6):  # with the sampler the sweep asks with
        claim = claim_trial(study, str(tmp_path), space, total=6,
                            sampler_for=lambda trials: build_sampler(spec, trials))
        seen.add(tuple(sorted(claim.params.items())))
        sweeper._tell(claim.number, 0.5)  # the last one: Optuna's grid sampler calls stop()
        claim.lock.release()
    assert len(seen) == 6 and {dict(p)['optimizer.momentum'] for p in seen} == {0.1, 0.2, 0.3}
    assert claim_trial(study, str(tmp_path), space, total=6) is None
