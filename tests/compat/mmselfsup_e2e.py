"""Unmodified mmselfsup 0.11.0 (BYOL) on mmcv 1.7.2's own runner and through the route: run on request.

::

    python tests/compat/mmselfsup_e2e.py [WORK_FOLDER]     # ~4 min on 2 busy cores

mmselfsup's own ``tools/train.py`` (shipped in its wheel under ``.mim``)
trains ``byol.py`` (``mmselfsup_e2e_setup.py``: ResNet-18 BYOL on 16 generated
32x32 images, LARS, cosine lr, its ``DistOptimizerHook`` accumulating over 2
iterations, its ``BYOLHook`` momentum update) as its README runs BYOL: through
``tools/dist_train.sh`` (``torchrun ... --launcher pytorch``; its train script
refuses BYOL without a launcher), on the CPU with gloo (``cpu_ddp_train.py``
replaces its CUDA-only calls), ``--seed 0 --deterministic``. Checked, on 1 and
on 2 processes: the route's log (every loss, lr, the target network's momentum)
equals mmcv's, and so do the checkpoint names, the final weights (online and
target networks, BN buffers) and the LARS state, bitwise. Then a resume from
``epoch_2.pth``: the route's third epoch and final weights equal its
uninterrupted run's bitwise (mmcv's resumed run draws new augmentations: it
restores no RNG state, docs/migration.md), mmcv's resumed run has the same
lr and momentum schedule (both log ``base_momentum`` at the first resumed
iteration: the momentum is a model attribute ``BYOLHook`` sets every 2nd one). ``byol_fixed_lr.py`` (SimSiam's fixed predictor lr, mmselfsup's own
``StepFixCosineAnnealing``) is compared on one process too. Not a pytest test:
each run costs 10-30 s, over the
suite's budget; the last result is recorded in docs/migration.md.

It needs a Python with mmcv 1.7.2 (tests/mmcv_python.py) and, on top of the venv
of tests/compat/test_mmcv_e2e.py::

    pip install --no-deps mmselfsup==0.11.0 timm && pip install attrs
"""

import os
import os.path as osp
import subprocess
import sys
import tempfile
import time

import torch

HERE = osp.dirname(osp.abspath(__file__))
sys.path[:0] = [HERE, osp.dirname(HERE)]
import mmcv_python  # noqa: E402  (tests/mmcv_python.py)
from test_mmcv_e2e import REPO, _assert_same_state, _checkpoints, _load, _log  # noqa: E402

CPU_DDP = osp.join(HERE, 'cpu_ddp_train.py')
PROBE = 'import mmcv, mmselfsup; print(mmcv.__version__, mmselfsup.__version__)'
SCHEDULE = ('mode', 'epoch', 'iter', 'lr', 'target_momentum')


def find_python() -> str:
    for python in mmcv_python.candidates():
        done = subprocess.run([python, '-c', PROBE], capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.split() == ['1.7.2', '0.11.0']:
            return python
    sys.exit('needs a Python with mmcv 1.7.2 and mmselfsup 0.11.0: see this file\'s docstring')


class World:
    """The interpreter, the data, mmselfsup's tools and the runs made so far."""

    def __init__(self, root: str) -> None:
        self.python, self.root = find_python(), root
        subprocess.run([self.python, osp.join(HERE, 'mmselfsup_e2e_setup.py'), root], check=True)
        self.tool = subprocess.run(
            [self.python, '-c', 'import mmselfsup, os; print(os.path.join(os.path.dirname('
                                'mmselfsup.__file__), ".mim", "tools", "train.py"))'],
            capture_output=True, text=True, check=True).stdout.strip()
        self.env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, HERE]),
                        CUDA_VISIBLE_DEVICES='', OMP_NUM_THREADS='1')

    def train(self, name: str, nproc: int, mmcv_runner: bool, *extra: str,
              config: str = 'byol.py') -> str:
        """``dist_train.sh CONFIG NPROC`` on the CPU; the work dir."""
        work_dir = osp.join(self.root, name)
        route = ['--mmcv-runner'] if mmcv_runner else []
        cmd = [self.python, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node',
               str(nproc), '-m', 'mtrain.compat.run', *route, CPU_DDP, self.tool,
               osp.join(self.root, config), '--launcher', 'pytorch', '--work-dir', work_dir,
               '--seed', '0', '--deterministic', *extra]
        start = time.time()
        done = subprocess.run(cmd, cwd=self.root, env=self.env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, f'{" ".join(cmd)} failed:\n{done.stderr[-6000:]}'
        print(f'  {name}: {time.time() - start:.1f} s')
        return work_dir


def compare(world: World, nproc: int) -> None:
    """mmcv's own runner and the route, from scratch and resumed, on ``nproc`` processes."""
    theirs = world.train(f'mmcv_{nproc}', nproc, True)
    ours = world.train(f'mtrain_{nproc}', nproc, False)
    log = _log(ours)
    assert log == _log(theirs), 'logs differ'
    train = [r for r in log if r['mode'] == 'train']
    assert len(train) == 3 * 16 // (4 * nproc) and len({r['target_momentum'] for r in train}) > 1
    assert _checkpoints(ours) == _checkpoints(theirs) == [
        'epoch_1.pth', 'epoch_2.pth', 'epoch_3.pth', 'latest.pth']
    last = osp.join(ours, 'epoch_3.pth')
    _assert_same_state(last, osp.join(theirs, 'epoch_3.pth'))
    print(f'  {nproc} process(es): {len(train)} iterations equal, last loss '
          f'{train[-1]["loss"]}, lr {train[-1]["lr"]}, momentum {train[-1]["target_momentum"]}; '
          f'{len(_load(last)["state_dict"])} tensors of the final weights equal')

    ours_resumed = world.train(f'mtrain_{nproc}_resumed', nproc, False,
                               '--resume-from', osp.join(ours, 'epoch_2.pth'))
    theirs_resumed = world.train(f'mmcv_{nproc}_resumed', nproc, True,
                                 '--resume-from', osp.join(theirs, 'epoch_2.pth'))
    # The momentum is a model attribute, not saved: BYOLHook sets it every 2nd iteration, so
    # the first resumed line shows base_momentum (mmcv's too); it steps nothing there.
    third = [r for r in log if r['epoch'] == 3]
    assert _log(ours_resumed, drop=['target_momentum']) == [
        {k: v for k, v in r.items() if k != 'target_momentum'} for r in third]
    _assert_same_state(osp.join(ours_resumed, 'epoch_3.pth'), last,
                       msgs_from=osp.join(theirs_resumed, 'epoch_3.pth'))
    schedule = [tuple(r[k] for k in SCHEDULE) for r in _log(ours_resumed)]
    assert schedule == [tuple(r[k] for k in SCHEDULE) for r in _log(theirs_resumed)]
    assert _checkpoints(ours_resumed) == _checkpoints(theirs_resumed)
    print(f'  {nproc} process(es): resumed from epoch_2.pth, epoch 3 and the final weights '
          'equal the uninterrupted run')


def compare_fixed_lr(world: World) -> None:
    """``byol_fixed_lr.py`` on one process: SimSiamHook's fixed lr, StepFixCosineAnnealing."""
    theirs = world.train('mmcv_fixed_lr', 1, True, config='byol_fixed_lr.py')
    ours = world.train('mtrain_fixed_lr', 1, False, config='byol_fixed_lr.py')
    assert _log(ours) == _log(theirs), 'logs differ'
    last = osp.join(ours, 'epoch_3.pth')
    _assert_same_state(last, osp.join(theirs, 'epoch_3.pth'))
    groups = _load(last)['optimizer']['param_groups']
    lrs = sorted({(g['lr'], g.get('fix_lr', False)) for g in groups})
    assert lrs[-1] == (0.05, True) and len(lrs) == 2, lrs  # the predictor's lr stayed fixed
    print(f'  fixed predictor lr: logs, weights and lr per group {lrs} equal')


def main() -> None:
    torch.set_num_threads(1)
    root = osp.abspath(sys.argv[1]) if len(sys.argv) > 1 else tempfile.mkdtemp('_mmselfsup')
    world = World(root)
    print(f'mmselfsup 0.11.0 BYOL in {root}')
    for nproc in (1, 2):
        compare(world, nproc)
    compare_fixed_lr(world)
    print('OK: mmcv 1.7.2 and the route agree bitwise')


if __name__ == '__main__':
    main()
