"""What mmcv 1.7.2's own files bind, read from their source without running them.

The import route answers ``hasattr(mmcv.runner.x, name)`` from this: a probe
for a name that neither mtrain's name table nor mmcv's own file has must not
execute anything (mmcv's ``device/npu`` module probes every module in
``sys.modules`` while iterating over it), so whether mmcv's file has a name is
read from its syntax tree. Only the module's top level counts (its ``if`` /
``try`` / ``with`` blocks included), as that is what an import binds.
"""

import ast
import functools
import importlib.util
import os.path as osp
from typing import Dict, FrozenSet, NamedTuple, Optional, Tuple


def mmcv_dir() -> str:
    """The directory of the installed mmcv package."""
    spec = importlib.util.find_spec('mmcv')
    if spec is None or not spec.submodule_search_locations:
        raise ImportError('the mmcv import route needs mmcv 1.x installed; '
                          "install it with: pip install 'mtrain[mmcv]' (docs/migration.md)")
    return list(spec.submodule_search_locations)[0]


def source_of(name: str) -> Optional[str]:
    """mmcv's own file for module ``name`` (``.../__init__.py`` for a package), or None."""
    base = osp.join(osp.dirname(mmcv_dir()), *name.split('.'))
    for path in (osp.join(base, '__init__.py'), base + '.py'):
        if osp.isfile(path):
            return path
    return None


class Bindings(NamedTuple):
    """The names a module's top level binds.

    ``defined``: by ``def``, ``class`` or assignment; ``imported``: name ->
    (absolute module, attribute, or None where the name is the module itself);
    ``open``: a star import or a module ``__getattr__`` (any name may exist).
    """
    defined: FrozenSet[str]
    imported: Dict[str, Tuple[str, Optional[str]]]
    open: bool


@functools.lru_cache(maxsize=None)
def bindings(name: str) -> Optional[Bindings]:
    """What mmcv's own module ``name`` binds, or None when mmcv has no such module."""
    path = source_of(name)
    if path is None:
        return None
    with open(path, encoding='utf-8') as f:
        tree = ast.parse(f.read(), filename=path)
    package = name if path.endswith('__init__.py') else name.rpartition('.')[0]
    defined, imported, star = set(), {}, False
    for node in _top_level(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split('.')[0]
                imported[bound] = (alias.name if alias.asname else bound, None)
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(package, node.module, node.level)
            for alias in node.names:
                star = star or alias.name == '*'
                imported[alias.asname or alias.name] = (source, alias.name)
    return Bindings(frozenset(defined), imported, star or '__getattr__' in defined)


def _top_level(body: list):
    """The statements an import runs: the body and its ``if``/``try``/``with`` blocks."""
    for node in body:
        yield node
        for field in ('body', 'orelse', 'finalbody'):
            if isinstance(node, (ast.If, ast.Try, ast.With)) and hasattr(node, field):
                yield from _top_level(getattr(node, field))
        for handler in getattr(node, 'handlers', ()) if isinstance(node, ast.Try) else ():
            yield from _top_level(handler.body)


def _absolute(package: str, module: Optional[str], level: int) -> str:
    if level == 0:
        return module or ''
    base = package.rsplit('.', level - 1)[0] if level > 1 else package
    return f'{base}.{module}' if module else base


def binds(module: str, name: str) -> bool:
    """Whether mmcv's own ``module`` has ``name`` once imported (a submodule counts)."""
    found = bindings(module)
    if found is None:
        return False
    return (name in found.defined or name in found.imported or found.open
            or source_of(f'{module}.{name}') is not None)


def defining_module(module: str, name: str, depth: int = 0) -> Optional[str]:
    """The mmcv module whose file defines what ``module.name`` is in mmcv, following imports.

    None where the name comes from outside mmcv, is a module, or is not there.
    """
    found = bindings(module)
    if found is None or depth > 16:
        return None
    if name in found.defined:
        return module
    if name in found.imported:
        source, attr = found.imported[name]
        if attr is not None and source.split('.')[0] == 'mmcv' and source != module:
            return defining_module(source, attr, depth + 1)
    return None
