"""A package-scoped ``_base_`` (``'mmdet::...'``) on a setuptools without pkg_resources.

mmengine 0.10.7 locates the package with ``pkg_resources``, gone since setuptools 81
(this venv has a newer one); mtrain locates it with importlib. The package here is a
throwaway one on ``sys.path`` under a name mmengine accepts (``mmyolo``), laid out as
OpenMMLab packages ship their configs (``<package>/.mim/configs``).
"""

import importlib.util

import pytest

from mtrain.config import load_config
from mtrain.utils import ConfigError
from throwaway_package import write_package


@pytest.fixture
def package(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(write_package(tmp_path / 'site')))
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


def test_the_venv_has_no_pkg_resources():
    """What the test above runs against (setuptools >= 81); if this fails, pin newer."""
    assert importlib.util.find_spec('pkg_resources') is None


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
