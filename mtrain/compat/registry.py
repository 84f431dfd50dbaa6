"""mmcv 1.x's ``Registry`` and ``build_from_cfg``, on mmengine's class.

1.x-era packages declare their registries with mmcv's class and hang them
under mmcv's (``Registry('models', parent=MMCV_MODELS)``,
``Registry('optimizer builder', parent=MMCV_OPTIMIZER_BUILDERS)``), name a
child's class with its package as scope (``'mmcls.ResNet'``) and give a
registry its own ``build_func``. This class keeps that contract (mmcv 1.7.2's
``mmcv/utils/registry.py``) and is an :class:`mmengine.registry.Registry`
subclass, so it interoperates with mtrain's own registries both ways: either
may be the other's parent, and a scoped name crosses between them.

What differs from mmengine's class, as in mmcv 1.x:

* the scope defaults to the top-level package of the module that creates the
  registry (``mmseg`` for ``mmseg/models/builder.py``);
* ``get('ResNet')`` looks in this registry only (mmengine also walks the
  parents); ``get('mmcls.ResNet')`` goes to the child of that scope, else to
  the root registry;
* nothing is imported on a lookup: mmengine would call a 1.x package's
  ``<scope>.utils.register_all_modules``, which 1.x packages do not have;
* ``register_module(SomeClass)`` (the pre-1.3 API) still registers, with a
  ``DeprecationWarning``.
"""

import inspect
import sys
import warnings
from typing import Any, Callable, Dict, Optional

from mmengine.registry import Registry as MMEngineRegistry

from ..utils.errors import did_you_mean


def build_from_cfg(cfg: Dict, registry: MMEngineRegistry,
                   default_args: Optional[Dict] = None) -> Any:
    """Build ``cfg['type']`` (a registered name, a class or a function) with the other keys.

    mmcv 1.7.2's function: ``type`` may come from ``default_args``; ``registry``
    may be any registry (mtrain's, mmengine's or this module's class); an
    exception raised by the constructor is re-raised as the same type with the
    class name in front (1.x code catches ``TypeError``/``KeyError`` by type).

    Raises:
        TypeError: ``cfg`` is not a dict, ``registry`` not a registry,
            ``default_args`` not a dict, or ``type`` neither a name nor callable.
        KeyError: no ``type``, or a name the registry does not know (the
            message names the closest registered names).
    """
    if not isinstance(cfg, dict):
        raise TypeError(f'cfg must be a dict, but got {type(cfg)}')
    if 'type' not in cfg and (default_args is None or 'type' not in default_args):
        raise KeyError('`cfg` or `default_args` must contain the key "type", '
                       f'but got {cfg}\n{default_args}')
    if not isinstance(registry, MMEngineRegistry):
        raise TypeError(f'registry must be an mmcv.Registry object, but got {type(registry)}')
    if not (default_args is None or isinstance(default_args, dict)):
        raise TypeError(f'default_args must be a dict or None, but got {type(default_args)}')
    args = cfg.copy()
    for name, value in (default_args or {}).items():
        args.setdefault(name, value)
    obj_type = args.pop('type')
    if isinstance(obj_type, str):
        obj_cls = registry.get(obj_type)
        if obj_cls is None:
            raise KeyError(f'{obj_type} is not in the {registry.name} registry.'
                           f'{did_you_mean(obj_type, _known_names(registry))}')
    elif inspect.isclass(obj_type) or inspect.isfunction(obj_type):
        obj_cls = obj_type
    else:
        raise TypeError(f'type must be a str or valid type, but got {type(obj_type)}')
    try:
        return obj_cls(**args)
    except Exception as e:
        _reraise_naming(e, obj_cls)


def _reraise_naming(error: Exception, obj_cls: Any) -> None:
    """Raise ``error`` again as its own type, the class name in front (as mmcv does)."""
    try:
        renamed = type(error)(f'{obj_cls.__name__}: {error}')
    except Exception:  # an exception type that takes other arguments
        raise error
    raise renamed from error


def _known_names(registry: MMEngineRegistry) -> list:
    names = list(registry.module_dict)
    for scope, child in registry.children.items():
        names += [f'{scope}.{n}' for n in child.module_dict]
    return names


class Registry(MMEngineRegistry):
    """A registry that maps names to classes or functions, with mmcv 1.x's rules.

    Args:
        name: what the registry holds (in messages).
        build_func: ``build_func(cfg, registry=..., **kwargs)`` used by
            :meth:`build`; default: the parent's, else :func:`build_from_cfg`.
        parent: any registry (one of mtrain's, mmengine's, or this class); it
            can then build this registry's classes as ``'<scope>.<name>'``.
        scope: the key under which the parent finds this registry; default:
            the top-level package of the module that creates it.
    """

    def __init__(self, name: str, build_func: Optional[Callable] = None,
                 parent: Optional[MMEngineRegistry] = None, scope: Optional[str] = None):
        if scope is None:
            scope = _caller_package(sys._getframe(1))
        if build_func is None and parent is None:
            build_func = build_from_cfg
        super().__init__(name, build_func=build_func, parent=parent, scope=scope)
        self._imported = True  # nothing to import lazily (see import_from_location)

    def __repr__(self) -> str:
        """mmcv's ``Registry(name=..., items={...})`` (mmengine prints a table)."""
        return f'{type(self).__name__}(name={self._name}, items={self._module_dict})'

    @staticmethod
    def infer_scope() -> str:
        """The top-level package of the module that called the caller (mmcv's rule)."""
        return _caller_package(sys._getframe(2))

    def import_from_location(self) -> None:
        """No lazy imports: a 1.x package registers its classes when it is imported."""

    def get(self, key: str) -> Optional[Any]:
        """The class registered as ``key``, or None (mmcv 1.x's lookup rules).

        ``'Name'`` and ``'<own scope>.Name'`` look in this registry only;
        ``'<child scope>.Name'`` in that child; any other scope in the root.
        """
        if not isinstance(key, str):
            raise TypeError(f'The key argument of `Registry.get` must be a str, got {type(key)}')
        scope, real_key = self.split_scope_key(key)
        if scope is None or scope == self._scope:
            return self._module_dict.get(real_key)
        if scope in self._children:
            return self._children[scope].get(real_key)
        root = self._get_root_registry()
        # mmcv 1.7.2 fails with AttributeError on a root asked for a foreign scope.
        return None if root is self else root.get(key)

    def register_module(self, name: Any = None, force: bool = False,
                        module: Optional[Any] = None) -> Any:
        """Register a class or function: ``@REG.register_module()``, ``(name=...)``,
        ``(module=cls)``, or the deprecated ``REG.register_module(cls)``.

        Raises:
            TypeError: what is registered is neither a class nor a function
                (a bound method, say), as mmcv 1.7.2.
        """
        if inspect.isclass(name):
            return self.deprecated_register_module(name, force=force)
        if module is not None:
            _check_registrable(module)
            return super().register_module(name=name, force=force, module=module)
        register = super().register_module(name=name, force=force)
        return lambda cls: register(_check_registrable(cls))

    def deprecated_register_module(self, cls: Any = None, force: bool = False) -> Any:
        """mmcv's pre-1.3 API: ``REG.register_module(cls)``, ``@REG.deprecated_register_module``."""
        warnings.warn('The old API of register_module(module, force=False) is deprecated '
                      'and will be removed, please use the new API '
                      'register_module(name=None, force=False, module=None) instead.',
                      DeprecationWarning, stacklevel=3)
        if cls is None:
            return lambda later: self.deprecated_register_module(later, force=force)
        return super().register_module(force=force, module=_check_registrable(cls))


def _check_registrable(obj: Any) -> Any:
    if not (inspect.isclass(obj) or inspect.isfunction(obj)):
        raise TypeError(f'module must be a class or a function, but got {type(obj)}')
    return obj


def _caller_package(frame: Any) -> str:
    """The top-level package name of the module running ``frame``."""
    module = inspect.getmodule(frame)
    name = module.__name__ if module is not None else frame.f_globals.get('__name__', '')
    return name.split('.')[0] or '__main__'
