"""Unmodified mmcls 0.25 / mmsegmentation 0.30 on 2 processes (gloo), validation on, through the route.

Each codebase's own ``tools/train.py`` runs under ``torchrun`` on two CPU
processes with ``--launcher pytorch``, as their ``dist_train.sh`` runs it. What
the harness replaces, and only that: their hard-coded CUDA DDP wrap
(``build_ddp(device='cuda')`` in mmseg, ``wrap_distributed_model`` in mmcls,
which assert a GPU) by the same wrap on the CPU (``cpu_ddp_train.py``). The
configs use ``BN``, so no ``SyncBN`` needs replacing. Every command has a
deadline (``DEADLINE``): a hang fails the test instead of stalling the suite.

Checked: no hang at the first evaluation (mmseg's and mmcls's own
``DistEvalHook._do_evaluate`` call ``evaluate`` on rank 0 alone); the metrics
the 2-process run logged equal a one-process ``tools/test.py`` of the same
checkpoint; and a 2-process run SIGKILLed after a checkpoint and resumed from
it ends bitwise equal to the uninterrupted one, with mmseg's
``RandomCrop(cat_max_ratio=0.75)``, whose number of random draws depends on
the image (so each rank's RNG state differs from the other's).

It needs every rank's RNG state in the checkpoint (``ranks``; issue 32 item 2)
and the route's fix of mmcv.device's probe (issue 32 item 3: mmcls's own
``DistributedSampler`` calls ``auto_select_device()`` whatever ``--device`` says).

Launch: ``torchrun ... -m mtrain.compat.run`` (:func:`_launch`, the one place
to change for the route's environment switch).
"""

import json
import os
import os.path as osp
import signal
import subprocess
from typing import List

import pytest

from test_mmcv_e2e import HERE, REPO, _assert_same_state, _load, _log, _mmcv_python

pytestmark = pytest.mark.slow

DEADLINE = 300  # seconds per command (each takes 5-25 on 2 busy cores); a hang is killed
CPU_DDP = osp.join(HERE, 'cpu_ddp_train.py')

SEG_DIST = '''_base_ = ['./seg.py']
custom_imports = dict(imports=['mmcv_kill_at'], allow_failed_imports=False)
custom_hooks = [dict(type='KillAtIteration')]  # a no-op unless MTRAIN_TEST_KILL_AFTER is set
crop_size = (24, 24)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='Resize', img_scale=(32, 32), keep_ratio=True),
    # redraws (up to 10 times) while one class covers 75 % of the crop: data-dependent draws
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='Normalize', mean=[127.5] * 3, std=[127.5] * 3, to_rgb=True),
    dict(type='Pad', size=crop_size, pad_val=0, seg_pad_val=255),
    dict(type='DefaultFormatBundle'),
    dict(type='Collect', keys=['img', 'gt_semantic_seg']),
]
data = dict(train=dict(pipeline=train_pipeline))
runner = dict(max_iters=6)  # checkpoints and evaluations at 3 and 6 (seg.py's interval)
'''


@pytest.fixture(scope='module')
def env(tmp_path_factory):
    """(python, data root, the codebases' site folder, subprocess environment, whether
    mmcls's ``auto_select_device()`` runs under the route)."""
    python = _mmcv_python()
    root = str(tmp_path_factory.mktemp('mmcv_dist'))
    subprocess.run([python, osp.join(HERE, 'mmcv_e2e_setup.py'), root], check=True)
    with open(osp.join(root, 'seg_dist.py'), 'w') as f:
        f.write(SEG_DIST)
    site = subprocess.run([python, '-c', 'import mmcls, os; print(os.path.dirname('
                                         'os.path.dirname(mmcls.__file__)))'],
                          capture_output=True, text=True, check=True).stdout.strip()
    environ = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, HERE]), CUDA_VISIBLE_DEVICES='',
                   OMP_NUM_THREADS='1')
    environ.pop('MTRAIN_TEST_KILL_AFTER', None)
    return python, root, site, environ, runs_auto_select_device(python, root)


def runs_auto_select_device(python: str, cwd: str) -> bool:
    """Whether mmcls 0.25's ``auto_select_device()`` runs under the route (issue 32 item 3).

    Its ``DistributedSampler`` calls it whatever ``--device`` says.
    """
    probe = ('import mtrain.compat.mmcv as r; r.enable(); '
             'from mmcls.utils import auto_select_device; print(auto_select_device())')
    env = dict(os.environ, PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES='')
    done = subprocess.run([python, '-c', probe], cwd=cwd, env=env, capture_output=True,
                          text=True)
    return done.returncode == 0 and done.stdout.split()[-1:] == ['cpu']


def _run(cmd: List[str], cwd: str, environ: dict) -> subprocess.CompletedProcess:
    """Run ``cmd`` in a session of its own; past ``DEADLINE`` the whole session is killed."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=environ, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # torchrun and both ranks
        out, _ = proc.communicate()
        pytest.fail(f'no result after {DEADLINE} s (a hang): {" ".join(cmd)}\n{out[-4000:]}')
    return subprocess.CompletedProcess(cmd, proc.returncode, out)


def _tool(site: str, codebase: str, name: str) -> str:
    return osp.join(site, codebase, '.mim', 'tools', name)


def _launch(env, codebase: str, config: str, work_dir: str, *extra: str,
            kill_after: int = None) -> subprocess.CompletedProcess:
    """``tools/train.py CONFIG --launcher pytorch`` on 2 processes, as ``dist_train.sh`` runs it."""
    python, root, site, environ, _ = env
    if kill_after is not None:
        environ = dict(environ, MTRAIN_TEST_KILL_AFTER=str(kill_after))
    cmd = [python, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node', '2',
           '-m', 'mtrain.compat.run', CPU_DDP, _tool(site, codebase, 'train.py'),
           osp.join(root, config), '--launcher', 'pytorch', '--work-dir', work_dir, *extra]
    return _run(cmd, root, environ)


def _one_process(env, codebase: str, tool: str, *args: str) -> None:
    """``tools/<tool> ARGS`` in one process, through the route."""
    python, root, site, environ, _ = env
    _ok(_run([python, '-m', 'mtrain.compat.run', _tool(site, codebase, tool), *args], root,
             environ))


def _ok(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, f'{" ".join(done.args)} failed:\n{done.stdout[-6000:]}'


def _same(logged: float, computed: float) -> bool:
    """mmcv's JSON log rounds Python floats to 5 digits (numpy floats it writes whole)."""
    return logged == computed or logged == round(computed, 5)


@pytest.fixture(scope='module')
def seg_run(env, tmp_path_factory):
    """The uninterrupted 2-process mmseg run (6 iterations, validated at 3 and 6)."""
    work_dir = str(tmp_path_factory.mktemp('seg_2proc'))
    _ok(_launch(env, 'mmseg', 'seg_dist.py', work_dir, '--seed', '0'))
    return work_dir


def test_mmseg_on_two_processes_logs_the_metrics_a_one_process_test_py_computes(env, seg_run,
                                                                                tmp_path):
    val = [r for r in _log(seg_run) if r['mode'] == 'val']
    assert len(val) == 2  # both evaluations ran (rank 0 alone scored, no hang)
    _one_process(env, 'mmseg', 'test.py', osp.join(env[1], 'seg_dist.py'),
                 osp.join(seg_run, 'iter_6.pth'), '--eval', 'mIoU', '--work-dir', str(tmp_path))
    [result] = [n for n in os.listdir(tmp_path) if n.startswith('eval_single_scale_')]
    with open(tmp_path / result) as f:
        metrics = json.load(f)['metric']
    assert {'aAcc', 'mIoU', 'mAcc'} <= set(metrics)
    for key, value in metrics.items():
        assert _same(val[-1][key], value), (key, val[-1][key], value)


def test_mmseg_killed_on_two_processes_resumes_bitwise(env, seg_run, tmp_path):
    assert 'ranks' in _load(osp.join(seg_run, 'iter_3.pth'))  # every rank's RNG state
    killed, resumed = str(tmp_path / 'killed'), str(tmp_path / 'resumed')
    done = _launch(env, 'mmseg', 'seg_dist.py', killed, '--seed', '0', kill_after=4)
    assert done.returncode != 0  # SIGKILLed after iteration 4, one past iter_3.pth
    assert sorted(n for n in os.listdir(killed) if n.endswith('.pth')) == [
        'iter_3.pth', 'latest.pth']
    _ok(_launch(env, 'mmseg', 'seg_dist.py', resumed, '--seed', '0',
                '--resume-from', osp.join(killed, 'iter_3.pth')))
    rest = [r for r in _log(seg_run) if r['iter'] > 3 or r['mode'] == 'val'][-4:]
    assert [(r['mode'], r['iter']) for r in rest] == [('train', 4), ('train', 5), ('train', 6),
                                                      ('val', 6)]  # (val: rank 0's batches)
    assert _log(resumed) == rest  # every loss, lr and metric
    resumed_last = osp.join(resumed, 'iter_6.pth')
    _assert_same_state(resumed_last, osp.join(seg_run, 'iter_6.pth'), msgs_from=resumed_last,
                       meta_keys=('epoch', 'iter'))
    # As mmcv: meta is the resumed checkpoint's, written before any hook_msgs were set.
    assert 'hook_msgs' not in _load(resumed_last)['meta']


def test_mmcls_on_two_processes_logs_the_metrics_a_one_process_test_py_computes(env, tmp_path):
    assert env[4]  # auto_select_device() works under the route (its sampler asks for it)
    work_dir = str(tmp_path / 'train')
    _ok(_launch(env, 'mmcls', 'cls.py', work_dir, '--seed', '0'))
    log = _log(work_dir)
    val = [r for r in log if r['mode'] == 'val']
    assert [r['epoch'] for r in val] == [1, 2, 3]  # validated every epoch, no hang
    assert len([n for n in os.listdir(work_dir) if n.startswith('best_accuracy_top-1')]) == 1
    out = str(tmp_path / 'test.json')
    _one_process(env, 'mmcls', 'test.py', osp.join(env[1], 'cls.py'),
                 osp.join(work_dir, 'epoch_3.pth'), '--metrics', 'accuracy',
                 '--metric-options', 'topk=(1,)', '--out', out, '--out-items', 'none')
    with open(out) as f:
        metrics = json.load(f)
    assert set(metrics) == {'accuracy_top-1'}
    assert _same(val[-1]['accuracy_top-1'], metrics['accuracy_top-1'])
