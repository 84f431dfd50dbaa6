"""Which file (or ``--cfg-options`` flag) set each key of a merged config.

``print_config.py --explain`` prints this: with several levels of ``_base_``
files it is otherwise hard to see where a value came from. Each file of the
inheritance chain is read on its own (its own assignments only), bases
before the file that names them, and later definitions win, as in the merge;
``_delete_=True`` forgets what the bases set under that key.
"""

import os.path as osp
import re
from typing import Any, Dict, List, Optional, Tuple

Sources = Dict[str, str]


def config_sources(path: str, cfg_options: Optional[Dict[str, Any]] = None) -> Sources:
    """``{'optimizer.lr': 'configs/_base_/schedules/x.py', ...}`` for every leaf key."""
    sources: Sources = {}
    _record_file(osp.abspath(path), sources, seen=[])
    for key in cfg_options or {}:
        _forget(sources, key)
        sources[key] = f'--cfg-options {key}'
    return sources


def _record_file(path: str, sources: Sources, seen: List[str]) -> None:
    if path in seen:
        raise ValueError(f'_base_ files form a cycle: {" -> ".join(seen + [path])}')
    values = {k: v for k, v in _run(path).items()
              if not k.startswith('__') and not callable(v) and not _is_module(v)}
    bases = values.pop('_base_', [])
    for base in [bases] if isinstance(bases, str) else bases:
        _record_file(osp.normpath(osp.join(osp.dirname(path), base)), sources, seen + [path])
    for key, _ in _leaves(values):
        sources[key] = path
    for key, value in _deletions(values):
        for known in [k for k in sources if k.startswith(key + '.')]:
            if not _defined_in(values, known):
                del sources[known]


# mmengine's ``{{ _base_.key }}`` and ``{{ fileDirname }}`` references: only the keys a file
# assigns matter here, so each reference stands in as None.
_REFERENCE = re.compile(r'\{\{\s*[\w.]+\s*\}\}')


def _run(path: str) -> Dict[str, Any]:
    """Execute one config file on its own, its ``{{ ... }}`` references replaced by None."""
    with open(path) as f:
        source = _REFERENCE.sub('None', f.read())
    namespace: Dict[str, Any] = {'__file__': path, '__name__': '__config__'}
    exec(compile(source, path, 'exec'), namespace)  # noqa: S102 - the user's own config
    return namespace


def _is_module(value: Any) -> bool:
    return type(value).__name__ == 'module'


def _leaves(values: Dict[str, Any], prefix: str = '') -> List[Tuple[str, bool]]:
    found = []
    for key, value in values.items():
        if key == '_delete_':
            continue
        path = f'{prefix}{key}'
        if isinstance(value, dict) and value:
            found += _leaves(value, path + '.')
        else:
            found.append((path, True))
    return found


def _deletions(values: Dict[str, Any], prefix: str = '') -> List[Tuple[str, Any]]:
    found = []
    for key, value in values.items():
        if isinstance(value, dict):
            if value.get('_delete_'):
                found.append((f'{prefix}{key}', value))
            found += _deletions(value, f'{prefix}{key}.')
    return found


def _defined_in(values: Dict[str, Any], dotted: str) -> bool:
    node: Any = values
    for part in dotted.split('.'):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _forget(sources: Sources, key: str) -> None:
    for known in [k for k in sources if k == key or k.startswith(key + '.')]:
        del sources[known]


def format_sources(sources: Sources, root: Optional[str] = None) -> str:
    """Two aligned columns, paths shown relative to ``root`` when given."""
    width = max((len(k) for k in sources), default=0)
    lines = []
    for key in sorted(sources):
        where = sources[key]
        if root and osp.isabs(where):
            where = osp.relpath(where, root)
        lines.append(f'{key:<{width}}  {where}')
    return '\n'.join(lines)
