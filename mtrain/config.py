"""Load and check a config file (mmengine ``Config`` underneath).

``load_config`` reads a Python config with ``_base_`` inheritance,
``_delete_=True`` and ``custom_imports`` (all mmengine's), applies
``--cfg-options`` (dotted keys, list indices such as ``custom_hooks.0.priority``),
and checks the top-level keys. Every mistake becomes a :class:`ConfigError`
naming the file, the key and a fix.

The top level may hold any helper variable (``data_root``, ``img_norm_cfg``,
...), as OpenMMLab configs do; a key that is *almost* a known key
(``lr_confg``, ``optimizer_cfg``) is reported as a typo.
"""

import ast
import difflib
import os
import os.path as osp
import sys
import traceback
from typing import Any, Dict, List, Optional, Tuple

from mmengine.config import Config, DictAction
from mmengine.utils import import_modules_from_strings

from .config_checks import check_run_settings
from .config_convert import detect_schema, for_training
from .config_packages import resolve_base, use_importlib_lookups
from .utils.errors import ConfigError, did_you_mean

#: Keys mtrain reads (mmcv 1.x's runtime schema plus mtrain's own).
KNOWN_KEYS = (
    'model', 'data', 'optimizer', 'optimizer_config', 'lr_config', 'momentum_config',
    'runner', 'checkpoint_config', 'log_config', 'evaluation', 'custom_hooks', 'workflow',
    'load_from', 'resume_from', 'work_dir', 'seed', 'custom_imports', 'batch_processor',
    'fp16', 'model_wrapper', 'device', 'total_epochs', 'deterministic', 'auto_resume',
    'compile', 'channels_last', 'nan_policy', 'data_root', 'activation_checkpointing',
    'dist_params', 'find_unused_parameters', 'sync_bn',  # read when distributed
    # OpenMMLab 1.x runtime keys that are accepted and have no effect here:
    'log_level', 'opencv_num_threads', 'mp_start_method', 'auto_scale_lr',
    'gpu_ids', 'cudnn_benchmark', 'gpu_id', 'filename')

#: Keys of ``data`` that are not datasets.
DATA_KEYS = ('samples_per_gpu', 'workers_per_gpu', 'train', 'val', 'test', 'train_dataloader',
             'val_dataloader', 'test_dataloader', 'persistent_workers', 'pin_memory',
             'prefetch_factor', 'drop_last', 'shuffle')


def load_config(path: str, cfg_options: Optional[Dict[str, Any]] = None) -> Config:
    """Read ``path``, apply ``cfg_options`` and check the result (in mtrain's schema).

    Raises:
        ConfigError: a missing file or ``_base_``, a syntax error, a failing
            ``custom_imports`` module, a bad ``--cfg-options`` key or a typo'd key.
    """
    cfg = _to_mtrain_schema(read_config(path, cfg_options), path)
    check_config(cfg, path, cfg_options)
    return cfg


def read_config(path: str, cfg_options: Optional[Dict[str, Any]] = None) -> Config:
    """``path`` with ``cfg_options`` applied, in the schema it is written in (unchecked).

    What a further ``--cfg-options`` would be merged into: an mmengine config's
    ``custom_hooks`` as written, before the converter adds its own hooks.
    """
    if not osp.isfile(path):
        raise ConfigError(f'config file {path} does not exist; check the path', filename=path)
    check_bases(path)
    add_project_root_to_path()
    use_importlib_lookups()  # package-scoped _base_ without pkg_resources
    try:
        cfg = Config.fromfile(path)
    except ImportError as e:
        raise _import_error(e, path) from e
    except FileNotFoundError as e:
        raise ConfigError(f'a _base_ file does not exist: {e}', key='_base_', filename=path) from e
    except SyntaxError as e:
        raise ConfigError(f'Python syntax error at line {e.lineno}: {e.msg}',
                          filename=path if e.filename in (None, '<unknown>') else e.filename) from e
    except Exception as e:  # mmengine raises bare Exception/KeyError for several cases
        where, found = _where_it_failed(e)  # e.g. a custom_imports module failing at import
        raise ConfigError(f'cannot read the config: {where if found else _plain(e)}',
                          filename=path) from e
    for old_root in base_values(path, 'data_root'):  # a child config's data_root moves
        rebase_data_root(cfg.get('data'), old_root, cfg.get('data_root'))  # the base's paths
    if cfg_options:
        old_root = cfg.get('data_root')
        apply_cfg_options(cfg, cfg_options, path)
        if 'data_root' in cfg_options:
            rebase_data_root(cfg.get('data'), old_root, cfg.get('data_root'))
        if any(key.split('.')[0] == 'custom_imports' for key in cfg_options):
            _import_custom_modules(cfg.get('custom_imports'))
    return cfg


def _to_mtrain_schema(cfg: Config, path: str) -> Config:
    """An mmengine-schema config, read into mtrain's (mmcv 1.x) schema in memory."""
    try:
        if detect_schema(cfg) == 'mmcv':
            return cfg
        return Config(for_training(cfg.to_dict()), filename=cfg.filename)
    except ConfigError as e:
        raise e.with_file(path)


def add_project_root_to_path() -> None:
    """Put the current directory on ``sys.path`` so ``custom_imports`` finds project modules.

    ``python tools/train.py`` puts ``tools/`` first on ``sys.path``, not the
    directory it is run from, so ``custom_imports=dict(imports=['my_project.optim'])``
    would fail from the repository root unless ``PYTHONPATH=.``. Every entry
    point reads its config here, so train.py, test.py, print_config.py and
    dist_train.sh all find ``./my_project`` the same way (as ``python -m`` does).
    """
    cwd = os.getcwd()
    if cwd not in sys.path and '' not in sys.path:
        sys.path.append(cwd)  # last: an installed package of the same name still wins


def _import_error(e: ImportError, path: str) -> ConfigError:
    """The failing ``custom_imports`` module's own error, with the file and line that raised it.

    mmengine wraps it as "Failed to import X"; the user needs the line inside
    their module (a leftover ``from mmcv...``, a misspelled name).
    """
    cause = e
    while (cause.__cause__ or cause.__context__) is not None:
        cause = cause.__cause__ or cause.__context__
    where, found = _where_it_failed(cause)
    fix = ('importing the module ran into an error at that line: fix it there' if found else
           'check that the module is importable (installed, on PYTHONPATH, or a package in the '
           'directory you run from)')
    return ConfigError(f'custom_imports failed: {where}. {fix[0].upper()}{fix[1:]}',
                       key='custom_imports', filename=path)


def _plain(error: BaseException) -> str:
    return f'{type(error).__name__}: {error}'


def _where_it_failed(error: BaseException) -> Tuple[str, bool]:
    """``file.py, line 3: from mmcv import X -> ModuleNotFoundError: ...``, and whether a line was found."""
    what = f'{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ""}'
    if isinstance(error, SyntaxError) and error.filename:
        return f'{error.filename}, line {error.lineno}: {what}', True
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not f.filename.startswith('<') and '/mmengine/' not in f.filename
              and '/importlib/' not in f.filename and f.filename != __file__]
    if not frames:  # the module itself was not found: nothing of the user's ran
        return what, False
    # The user's line: the last frame outside mtrain, installed packages and the stdlib.
    libraries = (osp.dirname(__file__) + os.sep, osp.dirname(os.__file__) + os.sep)
    own = [f for f in frames if not f.filename.startswith(libraries)
           and 'site-packages' not in f.filename]
    last = (own or frames)[-1]
    return f'{last.filename}, line {last.lineno}: {(last.line or "").strip()} -> {what}', True


def _import_custom_modules(custom_imports: Any) -> None:
    """``--cfg-options custom_imports=...``: import what the merged config names."""
    if not custom_imports:
        return
    if not isinstance(custom_imports, dict) or 'imports' not in custom_imports:
        raise ConfigError("custom_imports must be dict(imports=['module', ...])",
                          key='custom_imports', filename='--cfg-options')
    try:
        import_modules_from_strings(**custom_imports)
    except ImportError as e:
        raise _import_error(e, '--cfg-options') from e


def base_values(path: str, key: str) -> List[Any]:
    """The literal values of top-level ``key`` in the ``_base_`` files of ``path`` (bases first).

    Used to move the paths a base computed from its ``data_root`` when a child
    config sets its own: ``root=data_root + '/train'`` was evaluated with the
    base's value before the child's assignment was seen.
    """
    found: List[Any] = []
    for base in _bases(path):
        found += base_values(base, key)
        value = _assigned_literal(base, key)
        if value is not None:
            found.append(value)
    return found


def _bases(path: str) -> List[str]:
    bases = _assigned_literal(path, '_base_') or []
    return [resolve_base(b, path) for b in ([bases] if isinstance(bases, str) else bases)]


def _assigned_literal(path: str, key: str) -> Any:
    """The last literal ``key = ...`` at the top of ``path`` (read with ``ast``), or None."""
    with open(path) as f:
        tree = ast.parse(f.read(), filename=path)
    value = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == key for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                value = None
    return value


def check_bases(path: str, chain: Tuple[str, ...] = ()) -> None:
    """Follow ``_base_`` (read with ``ast``, nothing executed): missing files and cycles."""
    path = osp.abspath(path)
    if path in chain:
        cycle = ' -> '.join(osp.basename(p) for p in chain + (path, ))
        raise ConfigError(f'_base_ files form a cycle: {cycle}; remove one of the references',
                          key='_base_', filename=chain[0])
    with open(path) as f:
        source = f.read()
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError:
        return  # reported with its line by load_config
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == '_base_' for t in node.targets):
            try:
                bases = ast.literal_eval(node.value)
            except ValueError:
                return
            for base in [bases] if isinstance(bases, str) else bases:
                base_path = resolve_base(base, path)
                if not osp.isfile(base_path):
                    raise ConfigError(f"_base_ file '{base}' does not exist (looked for "
                                      f'{osp.normpath(base_path)}); paths are relative to the '
                                      'config that names them', key='_base_', filename=path)
                check_bases(base_path, chain + (path, ))


def apply_cfg_options(cfg: Config, options: Dict[str, Any], path: str) -> None:
    """Merge ``--cfg-options`` into ``cfg`` (list indices allowed), one key at a time.

    One at a time so that the error names the key that failed, not all of them.
    """
    for key, value in options.items():
        try:
            cfg.merge_from_dict({key: value}, allow_list_keys=True)
        except (KeyError, IndexError, TypeError, AssertionError, ValueError) as e:
            raise ConfigError(f'could not be applied ({type(e).__name__}: {e}).'
                              f'{_list_hint(cfg, key)} Use key=value with dotted keys and list '
                              'indices, e.g. optimizer.lr=0.01 or custom_hooks.0.priority=30',
                              key=key, filename='--cfg-options') from e


def _list_hint(cfg: Config, key: str) -> str:
    """For ``custom_hooks.3.priority``: how long the list is and how to set it whole."""
    parts, node = key.split('.'), cfg.to_dict()
    for i, part in enumerate(parts):
        if isinstance(node, (list, tuple)) and part.isdigit():
            name = '.'.join(parts[:i])
            size = f'has {len(node)} entries' if node else 'is empty'
            return (f' `{name}` {size}; to '
                    f"replace the whole list write {name}=\"[dict(type='...'), ...]\".")
        if not isinstance(node, dict) or part not in node:
            return ''
        node = node[part]
    return ''


def rebase_data_root(node: Any, old_root: Any, new_root: Any) -> Any:
    """Move the paths in ``data`` that start with the config's ``data_root`` to the new one.

    A config computes its dataset paths when it is read (``root=data_root +
    '/train'``), before ``--cfg-options data_root=/new`` is applied; this
    rewrites those strings in place so the one key moves every dataset.
    Returns the (possibly new) value of ``node``.
    """
    if not (isinstance(old_root, str) and old_root and isinstance(new_root, str)):
        return node
    if isinstance(node, str):
        if _under(node, new_root) and _under(new_root, old_root):
            return node  # already below the new root (new_root='data/x', old_root='data')
        rest = node[len(old_root):]
        if _under(node, old_root):
            rest = rest.lstrip('/')
            return osp.join(new_root, rest) if rest else new_root
        return node
    items = node.items() if isinstance(node, dict) else enumerate(node) \
        if isinstance(node, list) else ()
    for key, value in list(items):
        node[key] = rebase_data_root(value, old_root, new_root)
    return node


def _under(path: str, root: str) -> bool:
    rest = path[len(root):]
    return path.startswith(root) and (not rest or root.endswith('/') or rest[0] == '/')


def check_config(cfg: Config, path: Optional[str] = None,
                 cfg_options: Optional[Dict[str, Any]] = None) -> None:
    """Report keys that look like typos of known keys, and unknown ``data`` keys.

    A typo that came from ``--cfg-options`` is blamed on the flag, not the file.
    """
    if cfg.get('_delete_') is not None:
        raise ConfigError('_delete_ at the top level of a config has no effect; put it inside '
                          'the dict it should replace, e.g. optimizer = dict(_delete_=True, '
                          "type='AdamW', lr=1e-3)", key='_delete_', filename=path)

    def origin(name: str) -> Optional[str]:
        return source_of(name, cfg_options, path)

    for key in cfg.keys():
        if key in KNOWN_KEYS or key.startswith('_'):
            continue
        close = difflib.get_close_matches(key, KNOWN_KEYS, n=1, cutoff=0.8)
        if close:
            raise ConfigError(f"unknown top-level key '{key}'. Did you mean '{close[0]}'?",
                              key=key, filename=origin(key))
    try:
        check_run_settings(cfg)
    except ConfigError as e:
        raise e.with_file(origin(e.key))
    data = cfg.get('data')
    if data is not None:
        if not isinstance(data, dict):
            raise ConfigError('data must be a dict(samples_per_gpu=..., train=...)', key='data',
                              filename=path)
        for key in data:
            if key not in DATA_KEYS:
                raise ConfigError(f"unknown key '{key}' in data.{did_you_mean(key, DATA_KEYS)} "
                                  f"Known keys: {', '.join(DATA_KEYS)}.", key=f'data.{key}',
                                  filename=origin(f'data.{key}'))


def source_of(key: Optional[str], cfg_options: Optional[Dict[str, Any]],
              path: Optional[str]) -> Optional[str]:
    """``'--cfg-options'`` when an option set ``key`` (or a node above or below it), else ``path``.

    So that an error in a value typed on the command line is not blamed on the file.
    """
    hit = key is not None and any(k == key or k.startswith(key + '.') or key.startswith(k + '.')
                                  for k in cfg_options or {})
    return '--cfg-options' if hit else path


def parse_cfg_options(items: List[str]) -> Dict[str, Any]:
    """``['a.b=1', 'c=[1,2]']`` → ``{'a.b': 1, 'c': [1, 2]}`` (mmengine's value syntax).

    A value may also be a literal dict, ``dict(type='SGD', lr=0.1)`` or
    ``{'type': 'SGD'}`` (merged into the config's dict like a ``_base_``
    override; add ``_delete_=True`` to replace it).
    """
    options: Dict[str, Any] = {}
    for item in items:
        if '=' not in item:
            raise ConfigError(f"--cfg-options item '{item}' is not key=value; "
                              'write e.g. optimizer.lr=0.01')
        key, value = item.split('=', 1)
        if not key:
            raise ConfigError(f"--cfg-options item '{item}' has an empty key")
        options[key] = _parse_option_value(key, value)
    return options


def _parse_option_value(key: str, text: str) -> Any:
    """mmengine's syntax, except that any value holding a dict is read as a Python literal.

    mmengine's ``DictAction`` turns ``[dict(type='A'), dict(type='B')]`` into
    strings and recurses without end on ``[dict(a, b)]``.
    """
    if not text.strip().startswith(('dict(', '{')) and 'dict(' not in text and '{' not in text:
        return DictAction._parse_iterable(text)
    try:
        return _literal(ast.parse(text.strip(), mode='eval').body)
    except (SyntaxError, ValueError) as e:
        raise ConfigError(f'--cfg-options {key}={text} is not a literal dict ({e}); write '
                          f"e.g. {key}=\"dict(type='SGD', lr=0.1)\" with quoted strings, or set "
                          f'one key at a time: {key}.type=SGD', key=key) from None


def _literal(node: ast.AST) -> Any:
    """``ast.literal_eval`` that also reads ``dict(key=value, ...)`` calls."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == 'dict':
        if node.args or any(kw.arg is None for kw in node.keywords):
            raise ValueError('only dict(key=value, ...) is understood')
        return {kw.arg: _literal(kw.value) for kw in node.keywords}
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise ValueError('** inside {} is not understood')
        return {_literal(k): _literal(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_literal(e) for e in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    return ast.literal_eval(node)
