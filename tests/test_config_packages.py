"""A package-scoped ``_base_`` (``'mmdet::...'``) on a setuptools without pkg_resources.

mmengine 0.10.7 locates the package with ``pkg_resources``, gone since setuptools 81
(CI's venv has a newer one; elsewhere the fixture hides it); mtrain locates it with
importlib. The package here is a
throwaway one on ``sys.path`` under a name mmengine accepts (``mmyolo``), laid out as
OpenMMLab packages ship their configs (``<package>/.mim/configs``).
"""

import sys

import pytest

from mtrain.config import load_config
from mtrain.utils import ConfigError
from throwaway_package import write_package


@pytest.fixture
def package(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(write_package(tmp_path / 'site')))
    # As on setuptools >= 81, whatever this venv has: an import of pkg_resources fails.
    monkeypatch.setitem(sys.modules, 'pkg_resources', None)
    return tmp_path


def test_a_package_base_loads_with_its_own_bases_and_the_childs_overrides(package):
    cfg_file = package / 'cfg.py'
    cfg_file.write_text("_base_ = ['mmyolo::_base_/schedule.py']\n"
                        'optim_wrapper = dict(optimizer=dict(lr=0.01))\n')
    cfg = load_config(str(cfg_file))
    assert cfg.optimizer.lr == 0.01 and cfg.optimizer.momentum == 0.9
    hook, = [h for h in cfg.custom_hooks if h['type'] == 'ParamSchedulerHook']
    assert [s['type'] for s in hook['param_scheduler']] == ['LinearLR', 'MultiStepLR']
    assert cfg.runner == dict(type='EpochBasedRunner', max_epochs=3)


def test_pkg_resources_is_hidden_as_setuptools_81_has_it(package):
    """What the tests here run against, whichever setuptools this venv has."""
    with pytest.raises(ImportError):
        import pkg_resources  # noqa: F401


@pytest.mark.parametrize('base,message', [
    ('mmpose::_base_/schedule.py', 'its package is not installed'),
    ('mmyolo::_base_/nothing.py', 'nothing.py'),
    ('notapackage::_base_/schedule.py', 'write package::dir/file.py'),
])
def test_a_wrong_package_base_is_one_config_error(package, base, message):
    cfg_file = package / 'cfg.py'
    cfg_file.write_text(f'_base_ = [{base!r}]\n')
    with pytest.raises(ConfigError, match=message) as info:
        load_config(str(cfg_file))
    assert '\n' not in str(info.value) and 'cfg.py' in str(info.value)
