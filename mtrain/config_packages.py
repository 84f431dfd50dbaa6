"""``_base_ = 'mmdet::...'``: a base config inside an installed package, without pkg_resources.

mmengine 0.10.7 finds the package of a package-scoped ``_base_`` with
``pkg_resources``, which setuptools 81 removed (and mmengine has had no release
since), so such a config fails inside mmengine with ``No module named
'pkg_resources'``. mtrain finds the package with ``importlib`` and gives
mmengine's ``Config`` these two lookups in place of its own; the rest of the
resolution (``<package>/.mim/configs/<path>``, or the metafile for a named
experiment config, and the ``_scope_`` it sets) stays mmengine's::

    _base_ = ['mmdet::_base_/schedules/schedule_1x.py', './my_model.py']
"""

import importlib.metadata
import importlib.util
import os.path as osp
from typing import List

import mmengine.config.config as _engine_config
from mmengine.config import Config
from mmengine.config.utils import MODULE2PACKAGE

from .utils.errors import ConfigError


def _module_names(package: str) -> List[str]:
    """Import names to try for a distribution name (``mmsegmentation`` → ``mmseg``)."""
    names = [package]
    try:
        top_level = importlib.metadata.distribution(package).read_text('top_level.txt')
    except importlib.metadata.PackageNotFoundError:
        top_level = None
    names += (top_level or '').split()
    names += [module for module, dist in MODULE2PACKAGE.items() if dist == package]
    return names


def package_dir(package: str) -> str:
    """The directory of an installed (or importable) package, as mmengine's
    ``get_installed_path``. Raises ModuleNotFoundError when there is none."""
    for name in _module_names(package):
        spec = importlib.util.find_spec(name) if name.isidentifier() else None
        if spec is not None and spec.origin is not None:
            return osp.dirname(spec.origin)
    raise ModuleNotFoundError(f'{package} is not installed (no importable '
                              f"{' or '.join(sorted(set(_module_names(package))))})")


def is_installed(package: str) -> bool:
    """mmengine's ``is_installed``: an installed distribution or an importable package."""
    try:
        importlib.metadata.distribution(package)
        return True
    except importlib.metadata.PackageNotFoundError:
        try:
            package_dir(package)
            return True
        except ModuleNotFoundError:
            return False


def use_importlib_lookups() -> None:
    """Make mmengine's ``Config`` locate packages with :func:`package_dir` (idempotent)."""
    _engine_config.is_installed = is_installed
    _engine_config.get_installed_path = package_dir


def resolve_base(base: str, config_path: str) -> str:
    """The file a ``_base_`` entry of ``config_path`` names (relative, or ``package::path``).

    Raises:
        ConfigError: an unknown or missing package, a malformed ``package::path``.
    """
    if '::' not in base:
        return osp.join(osp.dirname(osp.abspath(config_path)), base)
    use_importlib_lookups()
    try:
        return Config._get_cfg_path(base, config_path)[0]
    except ModuleNotFoundError as e:
        raise ConfigError(f"_base_ '{base}': its package is not installed; pip install it or "
                          'put it on PYTHONPATH', key='_base_', filename=config_path) from e
    except FileNotFoundError as e:
        raise ConfigError(f"_base_ '{base}': {e}; the path after '::' is below the package's "
                          '.mim/configs', key='_base_', filename=config_path) from e
    except (AssertionError, ValueError) as e:
        raise ConfigError(f"_base_ '{base}': {e}; write package::dir/file.py with one of "
                          f"the packages mmengine knows ({', '.join(MODULE2PACKAGE)})",
                          key='_base_', filename=config_path) from e
