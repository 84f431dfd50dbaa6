"""The route on the real mmcv 1.7.2: probing a routed module runs nothing, own files stay apart.

mmcv 1.7.2's ``mmcv/device/npu/data_parallel.py`` iterates ``sys.modules`` calling
``hasattr(module, '_check_balance')`` on every module; mmcls 0.25's own
``tools/train.py`` imports it through ``auto_select_device()`` when run as its
README says. Each check runs in a fresh interpreter of the Python that has mmcv
1.7.2 (tests/mmcv_python.py; skipped with the reason otherwise).
"""

import os
import os.path as osp
import subprocess
import textwrap

import pytest

import mmcv_python  # tests/mmcv_python.py

pytestmark = pytest.mark.slow

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def _run_routed(code: str) -> str:
    python = mmcv_python.find('import mmcv; print(mmcv.__version__)', ['1.7.2'],
                              'mmcv 1.7.2 (MMCV_WITH_OPS=0)')
    env = dict(os.environ, PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES='')
    code = 'from mtrain.compat import mmcv as route\nroute.enable()\n' + textwrap.dedent(code)
    done = subprocess.run([python, '-c', code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_probing_routed_modules_changes_nothing_and_mmcv_device_imports():
    out = _run_routed('''
        import sys
        import mmcv.runner, mmcv.parallel, mmcv.engine, mmcv.runner.hooks.lr_updater
        import mmcv.runner.checkpoint
        before = dict(sys.modules)
        routed = [m for n, m in before.items() if n.startswith(('mmcv.runner', 'mmcv.parallel'))]
        assert len(routed) >= 5, sorted(before)
        assert not any(hasattr(m, '_check_balance') for m in routed)
        assert dict(sys.modules) == before      # no file of mmcv ran for the probes
        import mmcv.device                        # the same probe, while iterating sys.modules
        from mmcv.device import get_device
        print(get_device())
    ''')
    assert out.strip().splitlines()[-1] == 'cpu'


def test_own_files_keep_their_package_and_never_register_into_mtrain():
    _run_routed('''
        import mtrain
        fixed = mtrain.HOOKS.get('FixedLrUpdaterHook')
        from mmcv.runner.hooks import EmptyCacheHook      # hooks/__init__: from .memory import
        from mmcv.runner.hooks.lr_updater import format_param, FixedLrUpdaterHook
        assert EmptyCacheHook.__module__.endswith('mmcv.runner.hooks.memory')
        assert FixedLrUpdaterHook is mtrain.FixedLrUpdaterHook is fixed
        assert mtrain.HOOKS.get('FixedLrUpdaterHook') is fixed
        assert mtrain.HOOKS.get('EmptyCacheHook') is not EmptyCacheHook
        assert format_param('gen', None, dict(gen=0.5)) == 0.5   # mmcv's own helper ran
        assert EmptyCacheHook(after_iter=True)._after_iter
    ''')


def test_a_submodules_own_function_is_not_the_packages_namesake():
    """``mmcv.parallel._functions.scatter(input, devices)`` is not ``scatter(inputs, gpus)``."""
    _run_routed('''
        import inspect, torch, mtrain
        from mmcv.parallel import scatter
        from mmcv.parallel._functions import scatter as scatter_to_devices
        from mmcv.parallel.scatter_gather import scatter as package_scatter
        assert scatter is package_scatter is mtrain.scatter
        assert list(inspect.signature(scatter_to_devices).parameters) == [
            'input', 'devices', 'streams']
        assert torch.equal(scatter_to_devices(torch.ones(2), [-1]), torch.ones(2))
    ''')
