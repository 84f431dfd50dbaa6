"""The import route: a 1.x codebase's ``mmcv.runner`` / ``mmcv.parallel`` / ``mmcv.engine`` is mtrain.

With a pure-Python mmcv 1.7.2 installed (``python -m mtrain.compat.install
--mmcv``), :func:`enable` puts a finder first on ``sys.meta_path`` so
that

* ``mmcv.runner``, ``mmcv.parallel``, ``mmcv.engine`` and every module under
  them are *routed* modules whose names resolve to mtrain
  (:mod:`mtrain.compat.mmcv_names` says where each comes from);
* ``mmcv.utils.registry`` gives :class:`mtrain.compat.Registry` /
  :func:`~mtrain.compat.build_from_cfg`, so every 1.x registry (mmcv.cnn's,
  the codebase's) interoperates with mtrain's;
* ``mmcv._ext``, when mmcv was built without its compiled ops, is
  :class:`mtrain.compat.ops.ext.ExtModule`: mmcv's kernels on PyTorch and
  torchvision, and for an op not implemented a function that raises one line
  when called (never at import);

while the rest of mmcv (cnn, image, transforms, fileio, Config, logging) stays
mmcv's own. Nothing of mmcv or the codebase is changed on disk. Turn it on
before anything imports mmcv: ``python -m mtrain.compat.run tools/train.py ...``
(see :mod:`mtrain.compat.run`), ``MTRAIN_MMCV_ROUTE=1`` in the environment
(:mod:`mtrain.compat.autoroute`), or ``mtrain.compat.mmcv.enable()`` first thing.
"""

import importlib
import importlib.abc
import importlib.machinery
import os
import os.path as osp
import sys
import types
from typing import Any, List, Optional, Set

from . import mmcv_source
from .mmcv_names import PACKAGE_ALL, ROUTED
from .mmcv_own import load_mmcv_own
from .mmcv_source import mmcv_dir as _mmcv_dir
from .mmcv_source import source_of as _source_of
from .ops.ext import ExtModule

ROUTED_PACKAGES = ('mmcv.runner', 'mmcv.parallel', 'mmcv.engine')
ROUTED_MODULES = ('mmcv.utils.registry', )
#: mmcv's own files that names were taken from in this process (for reports).
used_mmcv_own: Set[str] = set()
_MISSING = object()


def _is_routed(name: str) -> bool:
    return name in ROUTED_MODULES or any(
        name == p or name.startswith(p + '.') for p in ROUTED_PACKAGES)


class RoutedModule(types.ModuleType):
    """A module of mmcv's runner side whose attributes are looked up in mtrain on first use."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith('__'):
            raise AttributeError(name)
        value = resolve(self.__name__, name)
        setattr(self, name, value)  # module-level names: looked up once
        return value

    def __dir__(self) -> List[str]:
        return sorted(set(super().__dir__()) | set(PACKAGE_ALL.get(self.__name__, ())))


def resolve(module: str, name: str) -> Any:
    """The object ``module.name`` means under the route (see :mod:`.mmcv_names`).

    Whether the name exists is decided before anything is imported or run
    (mtrain's name table, then mmcv's file read by :mod:`.mmcv_source`), so a
    probe for a name neither has changes nothing, ``sys.modules`` included.
    """
    if name in ROUTED:
        home, attr = ROUTED[name]
        return getattr(importlib.import_module(home), attr)
    value = _mtrain_name(module, name)
    if value is not _MISSING:
        return value
    if mmcv_source.source_of(f'{module}.{name}') is not None:
        return importlib.import_module(f'{module}.{name}')  # a submodule (routed)
    found = mmcv_source.bindings(module)
    if found is not None and name in found.imported:
        source, attr = found.imported[name]  # mmcv's file imports it: take it where it lives
        imported = importlib.import_module(source)
        return imported if attr is None else getattr(imported, attr)
    own = mmcv_source.defining_module(module, name)
    if own is None and found is not None and found.open:
        own = module
    if own is not None and own not in PACKAGE_ALL:  # mmcv.runner's own __init__ never runs
        used_mmcv_own.add(f'{own}.{name}')
        return getattr(load_mmcv_own(own), name)
    raise AttributeError(f"mtrain's route for {module} has no '{name}': mtrain lacks it and "
                         "mmcv 1.7.2's own module does not define it either (see "
                         'docs/migration.md, "Running an unmodified mmcv 1.x codebase")')


def _mtrain_name(module: str, name: str) -> Any:
    """mtrain's object for ``name``, or ``_MISSING`` (importing nothing for a name it lacks).

    A submodule's own function that only shares a package-level name
    (``mmcv.parallel._functions.scatter(input, devices)`` against the package's
    ``scatter(inputs, target_gpus)``) is not mtrain's: mmcv's own file gives it.
    """
    import mtrain
    if not (name in mtrain._NAMES or (name.endswith('Hook') and mmcv_source.binds(module, name))):
        return _MISSING  # mtrain's *Hook names import mtrain.hooks: only when mmcv has it
    package = next((p for p in ROUTED_PACKAGES if module == p or module.startswith(p + '.')),
                   None)
    if package is not None and name in PACKAGE_ALL[package] and module != package:
        here = mmcv_source.defining_module(module, name)
        there = mmcv_source.defining_module(package, name)
        if None not in (here, there) and here != there:
            return _MISSING
    value = getattr(mtrain, name, _MISSING)
    return _MISSING if isinstance(value, types.ModuleType) else value


class MMCVRouteFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the routed modules (and the ops placeholder); leaves every other import alone."""

    def __init__(self, route: bool = True) -> None:
        self.route = route

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname == 'mmcv._ext' and not _has_compiled_ops():
            return importlib.machinery.ModuleSpec(fullname, self)
        if not (self.route and _is_routed(fullname)):
            return None
        source = _source_of(fullname)
        if source is None:
            return None  # not a module of mmcv 1.7.2 either: the usual ImportError
        is_package = source.endswith('__init__.py')
        spec = importlib.machinery.ModuleSpec(fullname, self, is_package=is_package)
        if is_package:
            spec.submodule_search_locations = [osp.dirname(source)]
        return spec

    def create_module(self, spec: Any) -> types.ModuleType:
        if spec.name == 'mmcv._ext':
            return ExtModule(spec.name)
        return RoutedModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        if module.__name__ in PACKAGE_ALL:
            module.__all__ = list(PACKAGE_ALL[module.__name__])


def _has_compiled_ops() -> bool:
    directory = _mmcv_dir()
    return any(n.startswith('_ext') and n.endswith(('.so', '.pyd'))
               for n in os.listdir(directory))


_finder: Optional[MMCVRouteFinder] = None


def enable(route: bool = True) -> None:
    """Route mmcv's runner side to mtrain (``route=False``: only the ops placeholder).

    Raises:
        RuntimeError: mmcv's runner side (or ``mmcv`` itself) was imported
            before: the route must come first.
    """
    global _finder
    if _finder is not None:
        if _finder.route != route:
            raise RuntimeError('the mmcv import route is already set up the other way')
        return
    early = sorted(n for n in sys.modules if n == 'mmcv' or (route and _is_routed(n)))
    if early:
        raise RuntimeError(f'{early[0]} was imported before the mmcv route was enabled; '
                           'enable it first (python -m mtrain.compat.run script.py ...)')
    _mmcv_dir()
    _finder = MMCVRouteFinder(route)
    sys.meta_path.insert(0, _finder)
