"""Experiment-tracker hooks against their real clients, offline, read back from their own files.

Each tracker test trains the digits demo for one epoch (6 iterations of
256 images, a line every 2), then resumes from ``epoch_1.pth`` with
``--resume-from`` for a second epoch, and checks that the tracker holds the
text log's values at the global iteration: 2, 4, 6 then 8, 10, 12.
"""

import csv
import glob
import json
import logging
import os
import os.path as osp
import runpy
import struct
import sys
import time

import pytest

from mtrain.hooks import IterTimerHook, OptimizerHook, TextLoggerHook
from mtrain.hooks.logger.tracker import require_package
from mtrain.registry import HOOKS, build
from mtrain.utils import ConfigError

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
DIGITS = osp.join(ROOT, 'configs', 'digits', 'lenet_digits.py')
TRAIN_STEPS = [2, 4, 6, 8, 10, 12]  # 1,433 images / 256 = 6 iterations an epoch
VAL_STEPS = [6, 12]


def _client(name):
    return pytest.importorskip(name, reason=f"the {name} client is not installed "
                               "(pip install -e '.[trackers]')")


@pytest.fixture(scope='module')
def train():
    return runpy.run_path(osp.join(ROOT, 'tools', 'train.py'), run_name='tracker_train')['main']


def _train_and_resume(train, work_dir, hook, resume_from='epoch_1.pth'):
    """Epoch 1, then epoch 2 resumed from ``resume_from``; the .log.json lines of both runs.

    ``resume_from='iter_3.pth'``: as a run that crashed after iteration 6 and
    resumes from its last checkpoint, mid-epoch (the tracker holds steps
    past it). Checkpoints every 3 iterations then. None: epoch 1 only.
    """
    os.makedirs(work_dir, exist_ok=True)
    config = osp.join(work_dir, 'digits_tracker.py')
    every = ('checkpoint_config = dict(interval=3, by_epoch=False)\n'
             if (resume_from or '').startswith('iter_') else '')
    with open(config, 'w') as f:
        f.write(f'_base_ = {DIGITS!r}\ndata = dict(samples_per_gpu=256)\n'
                f'runner = dict(max_epochs=1)\n{every}'
                f"log_config = dict(interval=2, hooks=[dict(type='TextLoggerHook'), {hook!r}])\n")
    assert train([config, '--work-dir', work_dir]) == 0
    if resume_from is not None:
        assert train([config, '--work-dir', work_dir, '--resume-from',
                      osp.join(work_dir, resume_from), '--cfg-options',
                      'runner.max_epochs=2']) == 0
    lines = []
    for name in sorted(n for n in os.listdir(work_dir) if n.endswith('.log.json')):
        with open(osp.join(work_dir, name)) as f:
            lines += [r for r in map(json.loads, f) if 'mode' in r]
    return lines


def _expected(lines):
    """The text log's values by tracker tag, at the global iteration (the last line of each).

    A run resumed mid-epoch logs again the lines past its checkpoint that the
    crashed run logged: the same values, on the CPU (a bitwise resume).
    """
    train = list({(r['epoch'], r['iter']): r for r in lines if r['mode'] == 'train'}.values())
    val = list({r['epoch']: r for r in lines if r['mode'] == 'val'}.values())
    return {'train/loss': [((r['epoch'] - 1) * 6 + r['iter'], r['loss']) for r in train],
            'learning_rate': [((r['epoch'] - 1) * 6 + r['iter'], r['lr']) for r in train],
            'val/accuracy': [(r['epoch'] * 6, r['accuracy']) for r in val]}


def _check(logged, lines):
    """The tracker's (step, value) series equal the text log's.

    A val line repeats learning_rate and momentum at its iteration: same step, same value.
    """
    for tag, series in _expected(lines).items():
        got = dict(logged[tag])
        assert sorted(got) == [s for s, _ in series], tag
        assert [got[s] for s, _ in series] == pytest.approx([v for _, v in series], abs=1e-4), tag
    assert [s for s, _ in logged['train/loss']] == TRAIN_STEPS
    assert [s for s, _ in logged['val/accuracy']] == VAL_STEPS
    assert 'train/time' not in logged and 'momentum' in logged


# -- W&B -------------------------------------------------------------------------
def _wandb_records(path):
    """The protobuf records of a ``.wandb`` file (W&B's LevelDB-style log, 32 KiB blocks)."""
    from wandb.proto import wandb_internal_pb2
    with open(path, 'rb') as f:
        data = f.read()
    assert data[:4] == b':W&B'
    pos, payload = 7, b''  # after the header: ':W&B', magic, version
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:  # a block's tail too short for a header is padding
            pos += 32768 - pos % 32768
            continue
        length, kind = struct.unpack('<HB', data[pos + 4:pos + 7])
        payload += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a FULL record, or the LAST piece of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(payload)
            yield record
        if kind in (0, 1, 4):
            payload = b''


def _wandb_history(work_dir):
    logged, run_ids, config = {}, set(), {}
    for path in sorted(glob.glob(osp.join(work_dir, 'wandb', 'offline-run-*', '*.wandb'))):
        records = list(_wandb_records(path))
        deadline = time.time() + 60  # wandb-core's writer may finish the file after finish()
        while not any(r.WhichOneof('record_type') == 'exit' for r in records):
            assert time.time() < deadline, f'{path} has no exit record after 60 s'
            time.sleep(0.2)
            records = list(_wandb_records(path))
        for record in records:
            kind = record.WhichOneof('record_type')
            if kind == 'run':
                run_ids.add(record.run.run_id)
            elif kind == 'config':
                config.update({i.key: json.loads(i.value_json) for i in record.config.update})
            elif kind == 'history':
                items = {i.key or '/'.join(i.nested_key): json.loads(i.value_json)
                         for i in record.history.item}
                for tag, value in items.items():
                    if not tag.startswith('_'):
                        logged.setdefault(tag, []).append((record.history.step.num, value))
    # The first run and the resumed one are two files whose names need not sort in time
    # order (both can start within one second): order each tag's points by step.
    return {tag: sorted(points, key=lambda p: p[0]) for tag, points in logged.items()}, \
        run_ids, config


def test_wandb_offline_run_holds_the_text_log_and_resumes_the_same_run(train, tmp_path,
                                                                          monkeypatch):
    _client('wandb')
    for name, value in dict(WANDB_MODE='offline', WANDB_SILENT='true', WANDB_CONSOLE='off',
                            WANDB_DISABLE_CODE='true', WANDB_DISABLE_GIT='true',
                            WANDB_CONFIG_DIR=str(tmp_path / 'cfg'),
                            WANDB_CACHE_DIR=str(tmp_path / 'cache'),
                            WANDB_DATA_DIR=str(tmp_path / 'data')).items():
        monkeypatch.setenv(name, value)
    hook = dict(type='WandbLoggerHook', init_kwargs=dict(project='mtrain-test'),
                define_metric_cfg={'val/accuracy': 'max'})
    lines = _train_and_resume(train, str(tmp_path), hook)
    logged, run_ids, config = _wandb_history(str(tmp_path))
    _check(logged, lines)
    assert len(run_ids) == 1  # the resumed run appended to the first one (id, resume='allow')
    assert config['optimizer']['lr'] == 0.1  # the merged config, as run.config


def test_wandb_keeps_its_runs_in_the_users_wandb_dir(train, tmp_path, monkeypatch):
    _client('wandb')
    for name, value in dict(WANDB_MODE='offline', WANDB_SILENT='true', WANDB_CONSOLE='off',
                            WANDB_DISABLE_CODE='true', WANDB_DISABLE_GIT='true',
                            WANDB_DIR=str(tmp_path / 'mine'),
                            WANDB_CONFIG_DIR=str(tmp_path / 'cfg'),
                            WANDB_CACHE_DIR=str(tmp_path / 'cache'),
                            WANDB_DATA_DIR=str(tmp_path / 'data')).items():
        monkeypatch.setenv(name, value)
    (tmp_path / 'mine').mkdir()
    hook = dict(type='WandbLoggerHook', init_kwargs=dict(project='mtrain-test'),
                log_artifact=False)
    _train_and_resume(train, str(tmp_path / 'work'), hook, resume_from=None)  # one run
    assert glob.glob(str(tmp_path / 'mine' / 'wandb' / 'offline-run-*'))
    assert not osp.exists(tmp_path / 'work' / 'wandb')  # not the hook's default


# -- MLflow ----------------------------------------------------------------------
def _mlflow_env(tmp_path, monkeypatch):
    _client('mlflow')
    monkeypatch.setenv('MLFLOW_TRACKING_URI', (tmp_path / 'mlruns').as_uri())
    monkeypatch.setenv('MLFLOW_ALLOW_FILE_STORE', 'true')  # MLflow 3: a local file store
    from mlflow.tracking import MlflowClient
    return MlflowClient()


def test_mlflow_run_holds_the_text_log_config_and_checkpoints_and_is_reopened_on_resume(
        train, tmp_path, monkeypatch):
    client = _mlflow_env(tmp_path, monkeypatch)
    hook = dict(type='MlflowLoggerHook', exp_name='digits', tags=dict(team='vision'))
    lines = _train_and_resume(train, str(tmp_path), hook)
    [run] = client.search_runs([client.get_experiment_by_name('digits').experiment_id])
    logged = {tag: [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, tag)]
              for tag in run.data.metrics}
    _check(logged, lines)
    assert run.data.params['optimizer.lr'] == '0.1' and run.data.tags['team'] == 'vision'
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {'config.py', 'config_resumed_iter_6.py', 'models'} <= artifacts
    models = {a.path for a in client.list_artifacts(run.info.run_id, 'models')}
    assert {'models/epoch_1.pth', 'models/epoch_2.pth'} <= models


def test_mlflow_with_its_own_defaults_and_a_run_resumed_mid_epoch(train, tmp_path,
                                                                  monkeypatch):
    """No MLFLOW_TRACKING_URI: MLflow 3 keeps runs in ./mlflow.db (SQLite) of the cwd.

    The second run resumes from iter_3.pth after the first logged up to step 6
    (as a crash after iteration 6 would leave it): each step is held once.
    """
    _client('mlflow')
    for name in ('MLFLOW_TRACKING_URI', 'MLFLOW_ALLOW_FILE_STORE', 'MLFLOW_REGISTRY_URI'):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    hook = dict(type='MlflowLoggerHook', exp_name='digits', log_model=False)
    lines = _train_and_resume(train, str(tmp_path / 'work'), hook, resume_from='iter_3.pth')
    assert osp.isfile(tmp_path / 'mlflow.db')
    from mlflow.tracking import MlflowClient
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    [run] = client.search_runs([client.get_experiment_by_name('digits').experiment_id])
    logged = {tag: [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, tag)]
              for tag in run.data.metrics}
    _check(logged, lines)


def test_pyproject_trackers_extra_opens_mlflows_default_store():
    """A fresh `pip install -e '.[trackers]'` brings what MLflow 3's SQLite store needs."""
    import tomllib
    with open(osp.join(ROOT, 'pyproject.toml'), 'rb') as f:
        extra = tomllib.load(f)['project']['optional-dependencies']['trackers']
    assert {'mlflow-skinny', 'sqlalchemy', 'alembic'} <= set(extra)


def test_a_tracker_failing_mid_run_warns_once_and_training_and_text_log_go_on(
        make_runner, toy_loader, tmp_path, monkeypatch, caplog):
    import shutil

    from mtrain.hooks import Hook
    _mlflow_env(tmp_path, monkeypatch)

    class LoseTheStore(Hook):
        def after_train_iter(self, runner):
            if runner.iter == 3:
                shutil.rmtree(tmp_path / 'mlruns')

    runner = make_runner(max_len=2)
    runner.register_hook(OptimizerHook())
    runner.register_hook(IterTimerHook(), 'LOW')
    runner.register_hook(LoseTheStore(), 'HIGH')
    runner.register_hook(TextLoggerHook(interval=2), 'VERY_LOW')
    runner.register_hook(build(dict(type='MlflowLoggerHook', exp_name='toy', log_model=False),
                               HOOKS, 'hook'),
                         'VERY_LOW')
    with caplog.at_level(logging.WARNING, logger='mtrain.test'):
        runner.run([toy_loader], [('train', 1)])
    warnings = [r.message for r in caplog.records if 'MlflowLoggerHook' in r.message]
    assert len(warnings) == 1 and 'training goes on' in warnings[0]
    [log] = glob.glob(str(tmp_path / '*.log.json'))
    with open(log) as f:
        train_lines = [r for r in map(json.loads, f) if r.get('mode') == 'train']
    assert [(r['epoch'], r['iter']) for r in train_lines] == [(e, i) for e in (1, 2)
                                                             for i in (2, 4, 6, 8)]
    import mlflow
    assert mlflow.active_run() is None  # the run this hook opened was closed all the same


# -- DVCLive ---------------------------------------------------------------------
def _dvclive_series(live_dir, tag):
    with open(osp.join(live_dir, 'plots', 'metrics', *tag.split('/')) + '.tsv') as f:
        return [(int(r['step']), float(r[tag.split('/')[-1]]))
                for r in csv.DictReader(f, delimiter='\t')]


def test_dvclive_files_hold_the_text_log_and_go_on_after_resume(train, tmp_path):
    _client('dvclive')
    hook = dict(type='DvcliveLoggerHook', save_dvc_exp=False, dvcyaml=None,
                model_file=str(tmp_path / 'model' / 'model.pth'))
    lines = _train_and_resume(train, str(tmp_path), hook)
    live_dir = str(tmp_path / 'dvclive')
    logged = {tag: _dvclive_series(live_dir, tag)
              for tag in ('train/loss', 'learning_rate', 'val/accuracy', 'momentum')}
    _check(logged, lines)
    import yaml
    with open(osp.join(live_dir, 'params.yaml')) as f:
        assert yaml.safe_load(f)['optimizer']['lr'] == 0.1
    assert osp.isfile(tmp_path / 'model' / 'model.pth')  # model_file: saved every epoch


def test_dvclive_resumed_mid_epoch_holds_each_step_once(train, tmp_path):
    """Issue 22 item 7: the first run logged steps 2-6; resumed from iter_3.pth, steps 4
    and 6 come again and must not be appended twice (DVCLive held them twice)."""
    _client('dvclive')
    hook = dict(type='DvcliveLoggerHook', save_dvc_exp=False, dvcyaml=None)
    lines = _train_and_resume(train, str(tmp_path), hook, resume_from='iter_3.pth')
    live_dir = str(tmp_path / 'dvclive')
    logged = {tag: _dvclive_series(live_dir, tag)
              for tag in ('train/loss', 'learning_rate', 'val/accuracy', 'momentum')}
    _check(logged, lines)


# -- ClearML ---------------------------------------------------------------------
def test_clearml_offline_sessions_hold_the_text_log_with_steps_continued(train, tmp_path,
                                                                         monkeypatch):
    home = tmp_path / 'home'
    home.mkdir()
    # ClearML's config and offline cache live in HOME. Reporting in this process and
    # no code diff keep Task.close() from waiting on a reporter process (~10 s).
    (home / 'clearml.conf').write_text('sdk.development.report_use_subprocess: false\n'
                                       'sdk.development.store_uncommitted_code_diff: false\n')
    monkeypatch.setenv('HOME', str(home))
    monkeypatch.setenv('CLEARML_OFFLINE_MODE', '1')
    _client('clearml')
    hook = dict(type='ClearMLLoggerHook', init_kwargs=dict(
        project_name='mtrain', task_name='digits', auto_connect_frameworks=False,
        auto_resource_monitoring=False, auto_connect_arg_parser=False,
        auto_connect_streams=False, reuse_last_task_id=False))
    lines = _train_and_resume(train, str(tmp_path / 'work'), hook)
    sessions = glob.glob(str(home / '.clearml' / 'cache' / 'offline' / 'offline-*' /
                             'metrics.jsonl'))
    assert len(sessions) == 2  # offline: a task cannot be continued, a new one goes on
    logged = {}
    for path in sessions:
        with open(path) as f:
            for batch in map(json.loads, f):
                for event in batch:
                    if event['type'] == 'training_stats_scalar':
                        logged.setdefault(event['metric'], []).append(
                            (event['iter'], event['value']))
    logged = {tag: sorted(series) for tag, series in logged.items()}
    _check(logged, lines)


# -- the hooks mtrain does not have, and a missing client --------------------------
@pytest.mark.parametrize('name', ['PaviLoggerHook', 'SegmindLoggerHook', 'NeptuneLoggerHook'])
def test_retired_services_fail_before_training_naming_the_alternatives(name):
    cfg = dict(type=name, init_kwargs=dict(project='x'), add_last_ckpt=True)
    with pytest.raises(ConfigError) as info:
        build(cfg, HOOKS, 'log_config.hooks.1')
    assert info.value.key == 'log_config.hooks.1.type'
    assert 'WandbLoggerHook' in str(info.value) and 'not a registered' not in str(info.value)
    assert name != 'NeptuneLoggerHook' or 'closed in March 2026' in str(info.value)


def test_a_missing_client_fails_at_build_time_naming_the_pip_package():
    with pytest.raises(ConfigError, match=r'pip install no-such-tracker') as info:
        require_package('mtrain_no_such_tracker', 'no-such-tracker', 'NoSuchLoggerHook')
    assert info.value.key == 'type'  # build() prefixes the hook's key path


# -- the first line after a resume mid-interval --------------------------------------
@pytest.mark.parametrize('runner_cfg', [
    "runner = dict(type='EpochBasedRunner', max_epochs=2)",
    "runner = dict(_delete_=True, type='IterBasedRunner', max_iters=12)",
])
def test_the_first_line_after_a_resume_mid_interval_is_the_uninterrupted_runs(train, tmp_path,
                                                                              runner_cfg):
    """iter_6.pth falls inside a log interval of 4: the line at iteration 8 must still
    average iterations 5-8, as in the run that was never stopped."""
    config = tmp_path / 'resume_line.py'
    by_epoch = 'Epoch' in runner_cfg
    config.write_text(f'_base_ = {DIGITS!r}\ndata = dict(samples_per_gpu=128)\n{runner_cfg}\n'
                      'evaluation = None\ncheckpoint_config = dict(_delete_=True, interval=3, by_epoch=False)\n'
                      f"log_config = dict(interval=4, hooks=[dict(type='TextLoggerHook', "
                      f'by_epoch={by_epoch})])\n')  # 12 iterations an epoch

    def losses(work_dir, *resume):
        assert train([str(config), '--work-dir', str(work_dir), *resume]) == 0
        [log] = [n for n in os.listdir(work_dir) if n.endswith('.log.json')]
        with open(work_dir / log) as f:
            return [r['loss'] for r in map(json.loads, f) if r.get('mode') == 'train']
    whole = losses(tmp_path / 'whole')
    (tmp_path / 'cut').mkdir()
    os.link(tmp_path / 'whole' / 'iter_6.pth', tmp_path / 'cut' / 'iter_6.pth')
    resumed = losses(tmp_path / 'cut', '--resume-from', str(tmp_path / 'cut' / 'iter_6.pth'))
    assert resumed == whole[-len(resumed):] and len(resumed) >= 2


@pytest.mark.parametrize('name, client', [('MlflowLoggerHook', 'mlflow'),
                                          ('WandbLoggerHook', 'wandb'),
                                          ('DvcliveLoggerHook', 'dvclive'),
                                          ('ClearMLLoggerHook', 'clearml')])
def test_a_client_mocked_in_sys_modules_is_the_client(name, client, monkeypatch):
    """mmcv 1.7.2's own tests (and users') mock a tracker as ``sys.modules[x] = MagicMock()``:
    a mock has no ``__spec__``, so asking ``find_spec`` about it raised ValueError."""
    from unittest.mock import MagicMock
    monkeypatch.setitem(sys.modules, client, MagicMock())
    assert type(build(dict(type=name), HOOKS, 'log_config.hooks.0')).__name__ == name
    monkeypatch.setitem(sys.modules, client, None)  # Python's mark of a blocked import
    with pytest.raises(ConfigError, match='needs the'):
        build(dict(type=name), HOOKS, 'log_config.hooks.0')


def test_a_mocked_mlflow_client_receives_the_runs_metrics(make_runner, toy_loader, monkeypatch):
    from unittest.mock import MagicMock
    mlflow = MagicMock()
    monkeypatch.setitem(sys.modules, 'mlflow', mlflow)
    runner = make_runner(max_len=1)
    runner.register_training_hooks(lr_config=None, optimizer_config=OptimizerHook(),
                                   checkpoint_config=dict(interval=1),
                                   log_config=dict(interval=2, hooks=[
                                       dict(type='MlflowLoggerHook', exp_name='test',
                                            log_model=False, interval=2)]))
    runner.run([toy_loader], [('train', 1)])
    mlflow.set_experiment.assert_called_with('test')
    steps = [c.kwargs['step'] for c in mlflow.log_metrics.call_args_list]
    assert steps == list(range(2, len(toy_loader) + 1, 2))
    assert {'train/loss', 'learning_rate'} <= set(mlflow.log_metrics.call_args_list[0].args[0])
    assert osp.isfile(osp.join(runner.work_dir, 'epoch_1.pth'))  # the mock's run id not in it
