"""Unmodified mmgen 0.7.3 (MMGeneration) trains GANs on mtrain exactly as on mmcv 1.7.2's runner.

mmgen brings its own runner (``DynamicIterBasedRunner``: its own ``train``,
``run``, ``resume`` and ``save_checkpoint``, a dict of optimizers stepped
inside the model's ``train_step(data, optimizer, running_status=...)``, no
``OptimizerHook``) and its own hooks (EMA of the generator, sample grids,
``GenerativeEvalHook`` writing into ``runner.log_buffer``). Its own
``tools/train.py`` trains a small DCGAN on generated 32x32 images
(``mmgen_e2e_setup.py``) with mmcv 1.7.2's own runner and through the route:
every logged loss, lr and metric, the checkpoints (weights, EMA weights, both
Adam states) and the sample grids must be equal bitwise, in one process, on
two (gloo, CPU: ``cpu_ddp_train.py`` replaces mmgen's CUDA-only steps, and
under mmcv's own runner its ``init_dist``), and after ``--resume-from``.

Runs on request (``MTRAIN_MMGEN_TEST=1``): the one-process comparison alone
takes 15-25 s on 2 cores, all of it about 3 minutes; the last result is in
docs/migration.md ("mmgen 0.7.3 (GANs) end to end").

It needs a Python with mmcv 1.7.2 (MMCV_WITH_OPS=0, as tests/compat/test_mmcv_e2e.py
shows) and mmgen 0.7.3 installed from its git tag (PyPI's sdist lacks
``mmgen/models/architectures/stylegan/ada``, so ``import mmgen.models`` fails,
and ships no ``tools/``)::

    git clone -b v0.7.3 https://github.com/open-mmlab/mmgeneration && cd mmgeneration
    pip install --no-deps --no-build-isolation --use-pep517 -e .  # its setup.py imports torch
    pip install click requests

found as tests/mmcv_python.py says; skipped with the reason otherwise.
"""

import filecmp
import os
import os.path as osp
import subprocess

import pytest
import torch
from torch.testing import assert_close

import mmcv_python  # tests/mmcv_python.py
from test_mmcv_e2e import HERE, REPO, _load, _log
from test_mmcv_e2e_dist import CPU_DDP, _run

pytestmark = pytest.mark.slow

WANTED = {'mmcv': '1.7.2', 'mmgen': '0.7.3'}
SETUP = 'mmcv 1.7.2 (MMCV_WITH_OPS=0) and mmgen 0.7.3 (tests/compat/test_mmgen_e2e.py)'


@pytest.fixture(scope='module')
def world(tmp_path_factory):
    """A runner of mmgen's ``tools/train.py`` (1 or 2 processes, either runner) on the data."""
    if os.environ.get('MTRAIN_MMGEN_TEST') != '1':
        pytest.skip('mmgen 0.7.3 end to end, run on request: set MTRAIN_MMGEN_TEST=1 '
                    '(about 3 minutes on 2 cores)')
    python = mmcv_python.find('import mmcv, mmgen; print(mmcv.__version__, mmgen.__version__)',
                              list(WANTED.values()), SETUP)
    root = str(tmp_path_factory.mktemp('mmgen_e2e'))
    subprocess.run([python, osp.join(HERE, 'mmgen_e2e_setup.py'), root], check=True,
                   capture_output=True)
    package = subprocess.run([python, '-c', 'import mmgen, os; print(os.path.dirname('
                                            'mmgen.__file__))'],
                             capture_output=True, text=True, check=True).stdout.strip()
    tool = osp.join(package, '.mim', 'tools', 'train.py')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, HERE]), CUDA_VISIBLE_DEVICES='',
               OMP_NUM_THREADS='1')

    def train(config, work_dir, *extra, mmcv_runner=False, nproc=1):
        launch = ['-m', 'torch.distributed.run', '--standalone', '--nproc_per_node',
                  str(nproc)] if nproc > 1 else []
        route = ['--mmcv-runner'] if mmcv_runner else []
        # One process without --resume-from: the script as its README runs it.
        harness = [CPU_DDP] if nproc > 1 or '--resume-from' in extra else []
        cmd = [python, *launch, '-m', 'mtrain.compat.run', *route, *harness, tool, config,
               '--work-dir', work_dir, '--seed', '0', '--deterministic', *extra]
        if nproc > 1:
            cmd += ['--launcher', 'pytorch']
        done = _run(cmd, root, env)
        assert done.returncode == 0, f'{" ".join(cmd)} failed:\n{done.stdout[-6000:]}'
        return work_dir

    return train


def assert_same_states(a, b):
    """Weights, and each optimizer's state bitwise and groups equal, of two checkpoints."""
    assert_close(a['state_dict'], b['state_dict'], rtol=0, atol=0)
    assert a['optimizer'].keys() == b['optimizer'].keys()
    for name, state in a['optimizer'].items():
        assert_close(state['state'], b['optimizer'][name]['state'], rtol=0, atol=0)
        assert state['param_groups'] == b['optimizer'][name]['param_groups']


def _files(work_dir):
    return sorted(osp.relpath(osp.join(d, n), work_dir).replace(osp.basename(work_dir), 'W')
                  for d, _, names in os.walk(work_dir) for n in names
                  if n.endswith(('.pth', '.png')))


def assert_same_run(ours, theirs, names=('iter_3.pth', 'iter_6.pth')):
    """Equal logs, file names, checkpoints (weights, optimizers, meta iter/epoch), sample grids."""
    assert _log(ours) == _log(theirs)
    assert _files(ours) == _files(theirs)
    for name in names:
        a, b = (_load(osp.join(d, 'ckpt', osp.basename(d), name)) for d in (ours, theirs))
        assert_same_states(a, b)
        assert (a['meta']['iter'], a['meta']['epoch']) == (b['meta']['iter'], b['meta']['epoch'])
    for name in os.listdir(osp.join(ours, 'training_samples')):
        assert filecmp.cmp(osp.join(ours, 'training_samples', name),
                           osp.join(theirs, 'training_samples', name), shallow=False)
    return a


def _ckpt(work_dir, name):
    return osp.join(work_dir, 'ckpt', osp.basename(work_dir), name)


def test_mmgen_dynamic_runner_matches_mmcv(world, tmp_path):
    theirs = world('gan_eval.py', str(tmp_path / 'mmcv'), mmcv_runner=True)
    ours = world('gan_eval.py', str(tmp_path / 'mtrain'))
    last = assert_same_run(ours, theirs)
    log = _log(ours)
    assert [(r['mode'], r['iter']) for r in log] == [
        ('train', 1), ('train', 2), ('val', 3), ('train', 4), ('train', 5), ('val', 6)]
    assert [r['lr'] for r in log if r['mode'] == 'train'][-1] == \
        {'generator': 1e-04, 'discriminator': 2e-04}  # mmgen's Linear policy from iter 2 on
    assert {'mean_gap', 'mean_real', 'mean_fake'} <= set(log[-1])
    assert _files(ours) == [
        'ckpt/W/iter_3.pth', 'ckpt/W/iter_6.pth', 'ckpt/W/latest.pth',
        'training_samples/iter_3.png', 'training_samples/iter_6.png']
    weights = last['state_dict']
    assert not torch.equal(weights['generator_ema.output_layer.conv.weight'],
                           weights['generator.output_layer.conv.weight'])  # the EMA hook ran

    # mmgen's own resume (no RNG state, data from the start): not the uninterrupted run,
    # in both; but the same on both runners.
    resumed = {}
    for name, work_dir, flag in (('ours', ours, False), ('theirs', theirs, True)):
        resumed[name] = world('gan_eval.py', str(tmp_path / f'{name}_resumed'), '--resume-from',
                              _ckpt(work_dir, 'iter_3.pth'), mmcv_runner=flag)
    assert_same_run(resumed['ours'], resumed['theirs'], names=('iter_6.pth', ))
    assert [r['iter'] for r in _log(resumed['ours'])] == [4, 5, 6]


@pytest.mark.parametrize('config', ['gan_eval.py', 'gan_dyn.py', 'gan_pggan.py'])
def test_mmgen_two_processes_and_resume_match_mmcv(world, tmp_path, config):
    """gan_eval.py: generator and discriminator each in a DDP (``DistributedDataParallelWrapper``),
    evaluation on rank 0; gan_dyn.py: mmgen's default, one DDP, its reducer in train_step;
    gan_pggan.py: progressive growing, optimizers built and rebuilt by the model, the data
    loader and sampler resized by a hook (mmgen_e2e_setup.py)."""
    theirs = world(config, str(tmp_path / 'mmcv'), mmcv_runner=True, nproc=2)
    ours = world(config, str(tmp_path / 'mtrain'), nproc=2)
    assert_same_run(ours, theirs)
    # A 2-process resume loads the checkpoint into the wrapped modules (mmcv's load_state_dict
    # unwraps at every depth): the same on both runners.
    ours_resumed = world(config, str(tmp_path / 'mtrain_resumed'), '--resume-from',
                         _ckpt(ours, 'iter_3.pth'), nproc=2)
    theirs_resumed = world(config, str(tmp_path / 'mmcv_resumed'), '--resume-from',
                           _ckpt(theirs, 'iter_3.pth'), mmcv_runner=True, nproc=2)
    assert_same_run(ours_resumed, theirs_resumed, names=('iter_6.pth', ))
