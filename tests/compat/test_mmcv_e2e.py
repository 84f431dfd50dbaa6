"""Unmodified mmcls 0.25.0 / mmsegmentation 0.30.0 train on mtrain exactly as on mmcv 1.7.2's runner.

Each codebase's own ``tools/train.py`` (shipped in its wheel under ``.mim``)
trains a tiny config on tiny generated data (``mmcv_e2e_setup.py``) twice:
with mmcv 1.7.2's own runner (``python -m mtrain.compat.run --mmcv-runner``)
and through the import route onto mtrain (``python -m mtrain.compat.run``).
Per-iteration loss and lr, evaluation metrics, checkpoint file names, final
weights and optimizer state must be equal bitwise; then each resumes from a
mid-run checkpoint.

It needs a Python that has them (they pin mmcv 1.x, so not mtrain's venv)::

    python3 -m venv /work/venv-mmcv && . /work/venv-mmcv/bin/activate
    pip install torch==2.14.1 torchvision==0.29.1 && pip install -e .
    pip install 'setuptools<81' wheel
    MMCV_WITH_OPS=0 pip install --no-build-isolation mmcv==1.7.2
    pip install --no-deps mmcls==0.25.0 mmsegmentation==0.30.0
    pip install matplotlib prettytable packaging

found as tests/mmcv_python.py says (``$MMCV_PYTHON``, ``/work/venv-mmcv``, ``venv-mmcv``
beside this venv); skipped with the reason otherwise.
"""

import glob
import json
import os
import os.path as osp
import subprocess

import pytest
import torch

import mmcv_python  # tests/mmcv_python.py

pytestmark = pytest.mark.slow

HERE = osp.dirname(osp.abspath(__file__))
REPO = osp.dirname(osp.dirname(HERE))
TIMING = ('time', 'data_time', 'memory', 'eta')
WANTED = {'mmcv': '1.7.2', 'mmcls': '0.25.0', 'mmseg': '0.30.0'}


def _mmcv_python() -> str:
    return mmcv_python.find('import mmcv, mmcls, mmseg; print(mmcv.__version__, '
                            'mmcls.__version__, mmseg.__version__)', list(WANTED.values()),
                            'mmcv 1.7.2 (MMCV_WITH_OPS=0), mmcls 0.25.0 and mmsegmentation 0.30.0')


@pytest.fixture(scope='module')
def world(tmp_path_factory):
    """The interpreter, the data and configs, and a runner of the codebases' train scripts."""
    python = _mmcv_python()
    root = str(tmp_path_factory.mktemp('mmcv_e2e'))
    subprocess.run([python, osp.join(HERE, 'mmcv_e2e_setup.py'), root], check=True)
    site = subprocess.run([python, '-c', 'import mmcls, os; print(os.path.dirname('
                                         'os.path.dirname(mmcls.__file__)))'],
                          capture_output=True, text=True, check=True).stdout.strip()

    def train(codebase, config, work_dir, *extra, mmcv_runner=False):
        tool = osp.join(site, codebase, '.mim', 'tools', 'train.py')
        route = ['--mmcv-runner'] if mmcv_runner else []
        cmd = [python, '-m', 'mtrain.compat.run', *route, tool, osp.join(root, config),
               '--work-dir', work_dir, '--seed', '0', '--deterministic', *extra]
        env = dict(os.environ, PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES='')
        done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
        assert done.returncode == 0, f'{" ".join(cmd)} failed:\n{done.stderr[-6000:]}'
        return work_dir

    return root, train


def _log(work_dir, drop=()):
    """The ``*.log.json`` records after the env line, without timings (and ``drop``)."""
    [path] = glob.glob(osp.join(work_dir, '*.log.json'))
    with open(path) as f:
        records = [json.loads(line) for line in f][1:]
    return [{k: v for k, v in r.items() if k not in TIMING + tuple(drop)} for r in records]


def _checkpoints(work_dir):
    return sorted(n for n in os.listdir(work_dir) if n.endswith('.pth'))


def _load(path):
    return torch.load(path, map_location='cpu', weights_only=False)


def _assert_same_state(path_a, path_b, msgs_from=None, meta_keys=('epoch', 'iter')):
    """Same weights, optimizer state, ``meta_keys``; ``hook_msgs`` as in ``msgs_from`` (or b)."""
    a, b = _load(path_a), _load(path_b)
    assert a['state_dict'].keys() == b['state_dict'].keys()
    for name, value in a['state_dict'].items():
        assert torch.equal(value, b['state_dict'][name]), name
    state_a, state_b = a['optimizer']['state'], b['optimizer']['state']
    assert state_a.keys() == state_b.keys()
    for i in state_a:
        assert torch.equal(state_a[i]['momentum_buffer'], state_b[i]['momentum_buffer'])
    assert [g['lr'] for g in a['optimizer']['param_groups']] == \
        [g['lr'] for g in b['optimizer']['param_groups']]
    for key in meta_keys:
        assert a['meta'][key] == b['meta'][key], key
    msgs = _load(msgs_from)['meta'] if msgs_from else b['meta']
    assert _names(a['meta'].get('hook_msgs')) == _names(msgs.get('hook_msgs'))


def _names(msgs):
    """``hook_msgs`` with the checkpoint paths cut to file names (the work dirs differ)."""
    return {k: osp.basename(v) if isinstance(v, str) else v for k, v in (msgs or {}).items()}


def test_mmcls_epoch_runner_matches_mmcv(world, tmp_path):
    root, train = world
    # As mmcls's README runs it: no --device (its auto_select_device imports mmcv.device,
    # whose NPU module probes every module in sys.modules, routed ones included).
    theirs = train('mmcls', 'cls.py', str(tmp_path / 'mmcv'), mmcv_runner=True)
    ours = train('mmcls', 'cls.py', str(tmp_path / 'mtrain'))
    log = _log(ours)
    assert log == _log(theirs)
    assert [r['lr'] for r in log if r['mode'] == 'train'][:4] == [0.005, 0.02, 0.035, 0.05]
    assert len([r for r in log if r['mode'] == 'val']) == 3
    assert _checkpoints(ours) == _checkpoints(theirs)
    assert 'epoch_3.pth' in _checkpoints(ours)
    assert any(n.startswith('best_accuracy_top-1_epoch_') for n in _checkpoints(ours))
    _assert_same_state(osp.join(ours, 'epoch_3.pth'), osp.join(theirs, 'epoch_3.pth'))

    # Resume from epoch 2. mtrain restores the RNG state, so its third epoch is the
    # uninterrupted run's, bit for bit; mmcv's resumed run draws a new shuffle
    # (docs/migration.md), so with it only the schedule and the files compare.
    ours_resumed = train('mmcls', 'cls.py', str(tmp_path / 'mtrain_resumed'),
                         '--resume-from', osp.join(ours, 'epoch_2.pth'))
    theirs_resumed = train('mmcls', 'cls.py', str(tmp_path / 'mmcv_resumed'),
                           '--resume-from', osp.join(theirs, 'epoch_2.pth'),
                           mmcv_runner=True)
    third = [r for r in _log(theirs) if r['epoch'] == 3]
    assert _log(ours_resumed) == third
    # hook_msgs come from the resumed checkpoint in both (last_ckpt: epoch_1.pth, as mmcv).
    _assert_same_state(osp.join(ours_resumed, 'epoch_3.pth'), osp.join(theirs, 'epoch_3.pth'),
                       msgs_from=osp.join(theirs_resumed, 'epoch_3.pth'))
    schedule = [(r['mode'], r['epoch'], r['iter'], r['lr']) for r in _log(ours_resumed)]
    assert schedule == [(r['mode'], r['epoch'], r['iter'], r['lr'])
                        for r in _log(theirs_resumed)]
    assert _checkpoints(ours_resumed) == _checkpoints(theirs_resumed)


def test_mmseg_iter_runner_matches_mmcv(world, tmp_path):
    root, train = world
    theirs = train('mmseg', 'seg.py', str(tmp_path / 'mmcv'), mmcv_runner=True)
    ours = train('mmseg', 'seg.py', str(tmp_path / 'mtrain'))
    log = _log(ours)
    assert log == _log(theirs)
    val = [r for r in log if r['mode'] == 'val']
    assert len(val) == 3 and {'aAcc', 'mIoU', 'mAcc'} <= set(val[-1])
    assert _checkpoints(ours) == _checkpoints(theirs) == [
        'iter_3.pth', 'iter_6.pth', 'iter_9.pth', 'latest.pth']
    # meta epoch/iter of an iteration checkpoint are left out: mmcv writes runner.epoch + 1
    # and runner.iter (iter_9.pth: 3, 8), mtrain the point it resumes at (2, 9).
    _assert_same_state(osp.join(ours, 'iter_9.pth'), osp.join(theirs, 'iter_9.pth'),
                       meta_keys=())

    # Resume from iter 6: the rest of the uninterrupted run, bit for bit. (mmcv 1.7.2's own
    # IterBasedRunner.resume cannot run here: map_location='default' calls
    # torch.cuda.current_device(), which fails without a GPU.)
    ours_resumed = train('mmseg', 'seg.py', str(tmp_path / 'mtrain_resumed'),
                         '--resume-from', osp.join(ours, 'iter_6.pth'))
    last = [r for r in _log(theirs) if r['iter'] > 6 or r['mode'] == 'val'][-4:]
    assert [r['iter'] for r in last] == [7, 8, 9, 12]  # the val line's iter is len(val loader)
    assert _log(ours_resumed) == last
    resumed = osp.join(ours_resumed, 'iter_9.pth')
    _assert_same_state(resumed, osp.join(theirs, 'iter_9.pth'), msgs_from=resumed, meta_keys=())
    # As mmcv: hook_msgs come from the resumed checkpoint and last_ckpt is set after a save.
    assert _names(_load(resumed)['meta']['hook_msgs']) == {'last_ckpt': 'iter_3.pth'}
    assert _checkpoints(ours_resumed) == ['iter_9.pth', 'latest.pth']
