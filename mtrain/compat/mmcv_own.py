"""Running one of mmcv's own files under the route, for a name mtrain does not have.

:func:`load_mmcv_own` executes mmcv's file (``mmcv/runner/hooks/memory.py``
for ``EmptyCacheHook``) once, under a private module name, so the public name
(``mmcv.runner.hooks.memory``) stays the routed module. Its imports go
through the route, with two rules:

* a package's own ``__init__`` keeps its own ``__package__`` (its relative
  imports are siblings of its modules, not of the package);
* the registries it imports are read-only views: the file's
  ``@HOOKS.register_module()`` leaves mtrain's registries alone (mmcv's
  ``lr_updater.py`` would otherwise register a second
  ``FixedLrUpdaterHook``). Its classes are still importable by name.
"""

import builtins
import copy
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any, Dict, Tuple

from mmengine.registry import Registry as MMEngineRegistry

from .mmcv_source import source_of

#: Prefix of the private names mmcv's own files are loaded under.
OWN_PREFIX = 'mtrain.compat._mmcv_own.'


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
    """mmcv's own module ``name`` (e.g. ``mmcv.runner.hooks.memory``), executed once."""
    private = OWN_PREFIX + name
    if private in sys.modules:
        return sys.modules[private]
    path = source_of(name)
    package = name if path.endswith('__init__.py') else name.rpartition('.')[0]
    loader = importlib.machinery.SourceFileLoader(private, path)
    spec = _OwnSpec(private, loader, path, package)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = package
    module.__builtins__ = _OWN_BUILTINS
    sys.modules[private] = module
    try:
        loader.exec_module(module)
    except BaseException:
        del sys.modules[private]
        raise
    return module


def _own_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (),
                level: int = 0) -> Any:
    """``__import__`` for mmcv's own files: ``from x import REGISTRY`` gives a read-only view."""
    module = builtins.__import__(name, globals, locals, fromlist, level)
    return _RegistryViews(module) if fromlist else module


class _RegistryViews:
    """A module as an own file's ``from ... import`` sees it: registries read-only."""

    def __init__(self, module: types.ModuleType) -> None:
        self.__name__ = module.__name__
        self._module = module

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        return read_only(value) if isinstance(value, MMEngineRegistry) else value


_views: Dict[int, Tuple[MMEngineRegistry, MMEngineRegistry]] = {}  # id -> (registry, view)


def read_only(registry: MMEngineRegistry) -> MMEngineRegistry:
    """The same registry (same names, same build) whose ``register_module`` registers nothing.

    A shallow copy shares the registry's tables, so ``get``/``build`` and
    ``isinstance`` checks behave as the registry's own.
    """
    if id(registry) not in _views:
        view = copy.copy(registry)
        view.register_module = _leave_unregistered
        _views[id(registry)] = (registry, view)
    return _views[id(registry)][1]


def _leave_unregistered(name: Any = None, force: bool = False, module: Any = None) -> Any:
    if module is not None:
        return module
    if isinstance(name, type):  # the pre-1.3 API: register_module(cls)
        return name
    return lambda cls: cls


_OWN_BUILTINS = dict(vars(builtins), __import__=_own_import)
