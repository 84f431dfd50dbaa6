"""The module served as ``mmcv._ext``: mtrain's entry points, and a one-line error for the rest.

mmcv's wrappers load it with ``ext_loader.load_ext('_ext', [names])``, which
asserts ``hasattr`` for every name at import, so every name must resolve:
an implemented one to its function (:func:`mtrain.compat.ops.entry_points`),
any other to a stub that raises :class:`MissingOpError` when called — never at
import. Each op's first call is recorded in :data:`served` (what
``python -m mtrain.compat.run --list-ops`` prints); after it the attribute is
the plain function, so later calls cost nothing extra.
"""

import sys
import types
from typing import Any, Callable, Dict, List

from . import entry_points

#: ``{op: implementation}`` for each op a run called, in call order.
served: Dict[str, str] = {}
NOT_IMPLEMENTED = 'not implemented'
_VERSION_NAMES = ('get_compiler_version', 'get_compiling_cuda_version')


class MissingOpError(NotImplementedError):
    """An mmcv op that mtrain does not implement was called."""


def _caller(depth: int) -> str:
    return sys._getframe(depth + 1).f_globals.get('__name__', '?')


def _missing(op: str) -> Callable:
    def missing(*args: Any, **kwargs: Any) -> None:
        served.setdefault(op, NOT_IMPLEMENTED)
        raise MissingOpError(
            f"mmcv op '{op}' (called from {_caller(1)}) has no implementation in mtrain's "
            "mmcv._ext: install an mmcv-full 1.x built for this torch, or add it to "
            'mtrain/compat/ops (see that package\'s docstring)')
    missing.__qualname__ = missing.__name__ = op
    return missing


class ExtModule(types.ModuleType):
    """``mmcv._ext`` on PyTorch: attributes come from the op table on first use."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith('__'):
            raise AttributeError(name)
        if name in _VERSION_NAMES:
            return lambda: 'n/a'  # what collect_env reports for an mmcv without ops
        fn = entry_points().get(name)
        if fn is None:
            return _missing(name)  # not cached: each call reports its own caller
        return self._recording(name, fn)

    def _recording(self, name: str, fn: Callable) -> Callable:
        def first_call(*args: Any, **kwargs: Any) -> Any:
            served.setdefault(name, f'{fn.__module__}.{fn.__qualname__}')
            setattr(self, name, fn)  # later lookups find the function itself
            return fn(*args, **kwargs)
        first_call.__qualname__ = first_call.__name__ = name
        return first_call


def report() -> List[str]:
    """One line per op called in this process: ``op -> implementation``."""
    return [f'{op} -> {impl}' for op, impl in served.items()]
