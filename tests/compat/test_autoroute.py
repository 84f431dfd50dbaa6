"""``MTRAIN_MMCV_ROUTE=1``: a 1.x-era repository's own launch scripts run every rank through the route.

``onex_repo/`` is such a repository: ``tools/train.py`` builds its runner from
``mmcv.runner`` / ``mmcv.parallel`` names; ``tools/dist_train.sh`` starts it with
``python -m torch.distributed.launch`` (as mmcls/mmseg 0.x do) and
``tools/dist_train_torchrun.sh`` with ``torchrun``. Neither is changed: the
route comes from the start-up line ``python -m mtrain.compat.install`` writes
into a fresh venv's ``site-packages`` (the venv sees the mmcv Python's packages
through a ``.pth``; ``torchrun`` there is the console script pip would write).
The model is on the CPU (gloo): 1.x codebases' own train scripts hard-code
``build_ddp(device='cuda')``, so this repository's script is written for CPU.
"""

import json
import os
import os.path as osp
import subprocess
import sys

import pytest

import mmcv_python  # tests/mmcv_python.py

pytestmark = pytest.mark.slow

HERE = osp.dirname(osp.abspath(__file__))
REPO = osp.dirname(osp.dirname(HERE))
TORCHRUN = '#!{python}\nimport sys\nfrom torch.distributed.run import main\nsys.exit(main())\n'


@pytest.fixture(scope='module')
def venv(tmp_path_factory):
    """A fresh venv over the mmcv Python's packages, with the start-up line installed."""
    python = mmcv_python.find('import mmcv; print(mmcv.__version__)', ['1.7.2'],
                              'mmcv 1.7.2 (MMCV_WITH_OPS=0)')
    site = subprocess.run([python, '-c', 'import sysconfig; print(sysconfig.get_paths()'
                           "['purelib'])"], capture_output=True, text=True, check=True)
    root = str(tmp_path_factory.mktemp('venv'))
    subprocess.run([python, '-m', 'venv', '--without-pip', root], check=True)
    bin_dir = osp.join(root, 'bin')
    own_site = subprocess.run([osp.join(bin_dir, 'python'), '-c', 'import sysconfig; print('
                               "sysconfig.get_paths()['purelib'])"], capture_output=True,
                              text=True, check=True).stdout.strip()
    with open(osp.join(own_site, '00_mmcv_python.pth'), 'w') as f:
        f.write(f'import site; site.addsitedir({site.stdout.strip()!r})\n')
    with open(osp.join(bin_dir, 'torchrun'), 'w') as f:
        f.write(TORCHRUN.format(python=osp.join(bin_dir, 'python')))
    os.chmod(osp.join(bin_dir, 'torchrun'), 0o755)
    env = dict(os.environ, PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES='',
               PATH=os.pathsep.join([bin_dir, os.environ['PATH']]))
    done = subprocess.run([osp.join(bin_dir, 'python'), '-m', 'mtrain.compat.install'],
                          env=env, capture_output=True, text=True, check=True)
    assert osp.isfile(osp.join(own_site, 'mtrain_mmcv_route.pth')), done.stdout
    return env


def _first_finder(env, **extra):
    """The first finder on ``sys.meta_path`` once ``mmcv`` is imported."""
    code = 'import sys, mmcv; print(type(sys.meta_path[0]).__name__)'
    done = subprocess.run(['python', '-c', code], env=dict(env, **extra), capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def test_the_variable_alone_turns_the_route_on(venv):
    assert _first_finder(venv, MTRAIN_MMCV_ROUTE='1') == 'MMCVRouteFinder'
    assert _first_finder(venv) != 'MMCVRouteFinder'  # installed but off: mmcv's own


@pytest.mark.parametrize('script', ['dist_train.sh', 'dist_train_torchrun.sh'])
def test_the_repositorys_own_dist_train_script_trains_every_rank_through_the_route(
        venv, script, tmp_path):
    sys.path.insert(0, osp.join(osp.dirname(HERE), 'parallel'))
    from dist_launch import free_port
    work_dir = str(tmp_path / 'work')
    for _ in range(2):  # a free port can be taken by another process before the launcher binds
        env = dict(venv, MTRAIN_MMCV_ROUTE='1', PORT=str(free_port()), OMP_NUM_THREADS='1')
        done = subprocess.run(['bash', osp.join(HERE, 'onex_repo', 'tools', script), '2',
                               '--work-dir', work_dir], env=env, capture_output=True,
                              text=True, timeout=300)
        if 'address already in use' not in done.stderr.lower():
            break
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = []
    for rank in (0, 1):
        with open(osp.join(work_dir, f'rank{rank}.json')) as f:
            ranks.append(json.load(f))
    for seen in ranks:
        assert seen['mmcv_runner'] == 'RoutedModule' and seen['world_size'] == 2
        assert seen['runner'] == 'mtrain.runner.epoch_based_runner'
    assert ranks[0]['weight'] == ranks[1]['weight']  # one DDP model, gradients averaged
    assert osp.isfile(osp.join(work_dir, 'epoch_2.pth'))
