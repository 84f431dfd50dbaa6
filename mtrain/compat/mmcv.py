"""The import route: a 1.x codebase's ``mmcv.runner`` / ``mmcv.parallel`` / ``mmcv.engine`` is mtrain.

With a pure-Python mmcv 1.7.2 installed (``MMCV_WITH_OPS=0 pip install
mmcv==1.7.2``), :func:`enable` puts a finder first on ``sys.meta_path`` so
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
(see :mod:`mtrain.compat.run`), or ``mtrain.compat.mmcv.enable()`` first thing.
"""

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import os.path as osp
import sys
import types
from typing import Any, List, Optional, Set

from .mmcv_names import MMCV_OWN, PACKAGE_ALL, ROUTED
from .ops.ext import ExtModule

ROUTED_PACKAGES = ('mmcv.runner', 'mmcv.parallel', 'mmcv.engine')
ROUTED_MODULES = ('mmcv.utils.registry', )
#: Prefix of the private names mmcv's own files are loaded under.
OWN_PREFIX = 'mtrain.compat._mmcv_own.'
#: mmcv's own files that names were taken from in this process (for reports).
used_mmcv_own: Set[str] = set()


def _mmcv_dir() -> str:
    spec = importlib.util.find_spec('mmcv')
    if spec is None or not spec.submodule_search_locations:
        raise ImportError('the mmcv import route needs mmcv 1.x installed; '
                          "install it with: MMCV_WITH_OPS=0 pip install 'mmcv==1.7.2'")
    return list(spec.submodule_search_locations)[0]


def _source_of(name: str) -> Optional[str]:
    """mmcv's own file for module ``name`` (``.../__init__.py`` for a package), or None."""
    base = osp.join(osp.dirname(_mmcv_dir()), *name.split('.'))
    for path in (osp.join(base, '__init__.py'), base + '.py'):
        if osp.isfile(path):
            return path
    return None


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
    """The object ``module.name`` means under the route (see :mod:`.mmcv_names`)."""
    if name in ROUTED:
        home, attr = ROUTED[name]
        return getattr(importlib.import_module(home), attr)
    import mtrain
    try:
        return getattr(mtrain, name)
    except AttributeError:
        pass
    own = module if module not in PACKAGE_ALL else MMCV_OWN.get(name)
    if own is not None and _source_of(own) is not None:
        source = load_mmcv_own(own)
        if hasattr(source, name):
            used_mmcv_own.add(f'{own}.{name}')
            return getattr(source, name)
    raise AttributeError(f"mtrain's route for {module} has no '{name}': mtrain lacks it and "
                         "mmcv 1.7.2's own module does not define it either (see "
                         'docs/migration.md, "Running an unmodified mmcv 1.x codebase")')


class _OwnSpec(importlib.machinery.ModuleSpec):
    """A spec whose relative imports resolve against mmcv's package, not the private name."""

    def __init__(self, name: str, loader: Any, origin: str, package: str) -> None:
        super().__init__(name, loader, origin=origin)
        self.has_location = True
        self._package = package

    @property
    def parent(self) -> str:
        return self._package


def load_mmcv_own(name: str) -> types.ModuleType:
    """mmcv's own module ``name`` (e.g. ``mmcv.runner.base_module``), executed once.

    It runs under a private name so that ``mmcv.runner.base_module`` itself
    stays the routed module; its relative imports (``from .dist_utils import
    master_only``) go through the route to mtrain.
    """
    private = OWN_PREFIX + name
    if private in sys.modules:
        return sys.modules[private]
    path = _source_of(name)
    loader = importlib.machinery.SourceFileLoader(private, path)
    spec = _OwnSpec(private, loader, path, name.rpartition('.')[0])
    module = importlib.util.module_from_spec(spec)
    module.__package__ = spec.parent
    sys.modules[private] = module
    try:
        loader.exec_module(module)
    except BaseException:
        del sys.modules[private]
        raise
    return module


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
