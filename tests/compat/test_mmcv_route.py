"""The import route on a stand-in mmcv 1.x tree: which names are mtrain's, which stay mmcv's.

The stand-in has mmcv 1.7.2's layout and import statements where the route
depends on them (``mmcv.utils`` importing ``Registry`` from ``.registry``,
``mmcv.cnn`` declaring a registry with it, ``base_module`` importing
``master_only`` relatively, ``mmcv.ops`` loading ``mmcv._ext``); each check
runs in a fresh interpreter, as the route is process-wide. The real packages
are exercised by ``test_mmcv_e2e.py``.
"""

import os
import os.path as osp
import subprocess
import sys
import textwrap

import pytest

from mtrain.compat.runner_builder import (DefaultRunnerConstructor, RUNNER_BUILDERS,
                                          build_runner)
from mtrain.runner import EpochBasedRunner

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))

FAKE_MMCV = {
    '__init__.py': 'from .utils import *  # noqa\n',
    'utils/__init__.py': 'from .registry import Registry, build_from_cfg\n'
                         'from .logging import print_log\n',
    'utils/registry.py': 'class Registry:\n    OWN = True\n\n\ndef build_from_cfg():\n    pass\n',
    'utils/logging.py': 'def print_log(msg, logger=None):\n    print(msg)\n',
    'cnn/__init__.py': 'from ..utils import Registry\nfrom ..runner import Sequential\n'
                       "MODELS = Registry('model')\n",
    'runner/__init__.py': 'REAL_RUNNER = True\nfrom .base_module import BaseModule, Sequential\n'
                          'from .dist_utils import master_only\n',
    'runner/dist_utils.py': 'def master_only(func):\n    return func\n',
    'runner/base_module.py': textwrap.dedent('''\
        from .dist_utils import master_only
        ROUTED_MASTER_ONLY = master_only
        class BaseModule:
            pass
        class Sequential(BaseModule):
            pass
        class OnlyInMmcv:
            pass
        '''),
    'runner/hooks/__init__.py': '',
    'runner/hooks/lr_updater.py': 'class LrUpdaterHook:\n    pass\n',
    'parallel/__init__.py': '',
    'engine/__init__.py': '',
    'ops/__init__.py': "import importlib\next = importlib.import_module('mmcv._ext')\n",
}


@pytest.fixture
def fake_mmcv(tmp_path):
    for rel, text in FAKE_MMCV.items():
        path = tmp_path / 'mmcv' / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def _run(fake_root, code, *args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake_root), REPO]))
    done = subprocess.run([sys.executable, *args, '-c', textwrap.dedent(code)] if not args
                          else [sys.executable, *args], env=env, capture_output=True,
                          text=True, cwd=str(fake_root))
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_routed_names_are_mtrains_the_rest_mmcvs_own(fake_mmcv):
    """mmcv.runner/parallel/engine resolve to mtrain; names mtrain lacks come from mmcv's own
    file with its relative imports routed; mmcv.utils' Registry is the compat class."""
    _run(fake_mmcv, '''
        from mtrain.compat import mmcv as route
        route.enable()
        import mtrain, mtrain.evaluation
        from mmcv.runner import EpochBasedRunner, HOOKS, OPTIMIZER_BUILDERS, build_runner
        from mmcv.runner.hooks.lr_updater import LrUpdaterHook, annealing_cos
        from mmcv.parallel import MODULE_WRAPPERS, is_module_wrapper
        from mmcv.engine import single_gpu_test, multi_gpu_test, collect_results_cpu
        import mmcv.runner
        assert EpochBasedRunner is mtrain.EpochBasedRunner and HOOKS is mtrain.HOOKS
        assert OPTIMIZER_BUILDERS is mtrain.OPTIMIZER_CONSTRUCTORS
        assert LrUpdaterHook is mtrain.LrUpdaterHook and annealing_cos.__module__.startswith('mtrain')
        assert MODULE_WRAPPERS is mtrain.MODEL_WRAPPERS and is_module_wrapper is mtrain.is_module_wrapper
        assert single_gpu_test is mtrain.evaluation.single_gpu_test
        assert build_runner.__module__ == 'mtrain.compat.runner_builder'
        assert not hasattr(mmcv.runner, 'REAL_RUNNER')   # mmcv's own __init__ never ran
        assert 'EvalHook' in mmcv.runner.__all__ and 'EvalHook' in dir(mmcv.runner)

        import mtrain
        from mmcv.runner.base_module import OnlyInMmcv, ROUTED_MASTER_ONLY
        from mmcv.runner import BaseModule
        assert ROUTED_MASTER_ONLY is mtrain.master_only   # its relative import was routed
        assert OnlyInMmcv.__module__ == 'mtrain.compat._mmcv_own.mmcv.runner.base_module'
        own = __import__('sys').modules['mtrain.compat._mmcv_own.mmcv.runner.base_module']
        assert BaseModule is getattr(mtrain, 'BaseModule', own.BaseModule)
        assert 'mmcv.runner.base_module.OnlyInMmcv' in route.used_mmcv_own
        try:
            from mmcv.runner import NoSuchName
        except ImportError as e:
            assert 'NoSuchName' in str(e), e
        else:
            raise AssertionError('an unknown name must fail')

        import mmcv, mmcv.cnn
        from mtrain.compat import Registry, build_from_cfg
        assert mmcv.Registry is Registry and mmcv.build_from_cfg is build_from_cfg
        assert type(mmcv.cnn.MODELS) is Registry and mmcv.cnn.MODELS.scope == 'mmcv'
        mmcls_models = Registry('models', parent=mmcv.cnn.MODELS, scope='mmcls')
        @mmcls_models.register_module()
        class ResNet:
            pass
        assert isinstance(mmcv.cnn.MODELS.build(dict(type='mmcls.ResNet')), ResNet)
        mmcv.print_log('stays mmcv')   # the rest of mmcv.utils is mmcv's own
    ''')


@pytest.mark.slow
def test_uncompiled_ops_import_and_fail_only_when_called(fake_mmcv):
    _run(fake_mmcv, '''
        from mtrain.compat import mmcv as route
        route.enable(route=False)
        import mmcv.ops, mmcv.runner
        assert mmcv.runner.REAL_RUNNER and mmcv.Registry.OWN   # --mmcv-runner: all mmcv's own
        assert mmcv.ops.ext.get_compiler_version() == 'n/a'
        try:
            mmcv.ops.ext.nms_quadri()  # one mtrain.compat.ops does not implement
        except RuntimeError as e:
            assert "op 'nms_quadri' (called from __main__) has no implementation" in str(e)
        else:
            raise AssertionError('a missing op must raise')
    ''')


@pytest.mark.slow
def test_the_route_must_come_before_mmcv(fake_mmcv):
    out = _run(fake_mmcv, '''
        import mmcv
        from mtrain.compat import mmcv as route
        try:
            route.enable()
        except RuntimeError as e:
            print(e)
    ''')
    assert 'mmcv was imported before the mmcv route was enabled' in out


@pytest.mark.slow
def test_run_module_runs_a_script_as_main_with_its_arguments(fake_mmcv):
    script = fake_mmcv / 'train.py'
    script.write_text(textwrap.dedent('''
        import sys
        from mmcv.runner import IterBasedRunner
        if __name__ == '__main__':
            print(IterBasedRunner.__module__, sys.argv[1:])
    '''))
    out = _run(fake_mmcv, None, '-m', 'mtrain.compat.run', str(script), 'cfg.py', '--seed', '0')
    assert out.strip() == "mtrain.runner.iter_based_runner ['cfg.py', '--seed', '0']"


def test_build_runner_follows_mmcv_with_a_constructor_extension_point(toy_model, tmp_path,
                                                                       logger):
    import torch
    default_args = dict(model=toy_model, batch_processor=None, work_dir=str(tmp_path),
                        optimizer=torch.optim.SGD(toy_model.parameters(), lr=0.1),
                        logger=logger, meta=dict(seed=0))
    runner = build_runner(dict(type='EpochBasedRunner', max_epochs=2), default_args)
    assert type(runner) is EpochBasedRunner and runner.max_epochs == 2
    assert runner.meta['seed'] == 0

    @RUNNER_BUILDERS.register_module(force=True)
    class CountingConstructor(DefaultRunnerConstructor):
        made = 0

        def __call__(self):
            CountingConstructor.made += 1
            return super().__call__()

    try:
        runner = build_runner(dict(type='EpochBasedRunner', max_epochs=1,
                                   constructor='CountingConstructor'), default_args)
        assert CountingConstructor.made == 1 and runner.max_epochs == 1
    finally:
        RUNNER_BUILDERS.module_dict.pop('CountingConstructor')
    with pytest.raises(TypeError, match='runner_cfg should be a dict'):
        DefaultRunnerConstructor(['EpochBasedRunner'])
    with pytest.raises(KeyError, match='EpochBasedRuner is not in the runner registry'):
        build_runner(dict(type='EpochBasedRuner', max_epochs=1), default_args)


def test_runner_utils_helpers_behave_as_mmcvs():
    import re
    import torch
    from mtrain.compat.runner_utils import get_host_info, get_time_str, obj_from_dict
    assert re.fullmatch(r'\d{8}_\d{6}', get_time_str()) and '@' in get_host_info()
    param = torch.nn.Parameter(torch.zeros(2))
    sgd = obj_from_dict(dict(type='SGD', lr=0.1), torch.optim, dict(params=[param]))
    assert isinstance(sgd, torch.optim.SGD) and sgd.param_groups[0]['lr'] == 0.1
    assert obj_from_dict(dict(type=dict, a=1)) == {'a': 1}
    with pytest.raises(AssertionError):
        obj_from_dict(dict(lr=0.1), torch.optim)
    with pytest.raises(TypeError, match='type must be a str or valid type'):
        obj_from_dict(dict(type=3))
