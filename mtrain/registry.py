"""Every registry of mtrain, declared in one leaf module.

Each registry is an :class:`mmengine.registry.Registry` in scope ``mtrain`` and,
where mmengine has a root registry of the same kind, its child, so that
OpenMMLab modules registered there can be named from an mtrain config too.
``locations`` makes a registry import the package that fills it the first
time it is searched, so ``import mtrain`` itself stays cheap.

Build from a config with :func:`build`, which names the config key path and
the closest registered names when a ``type`` is unknown::

    model = build(cfg.model, MODELS, key='model')
"""

import inspect
from typing import Any, Dict, Optional

from mmengine.registry import DATASETS as MME_DATASETS
from mmengine.registry import HOOKS as MME_HOOKS
from mmengine.registry import MODEL_WRAPPERS as MME_MODEL_WRAPPERS
from mmengine.registry import MODELS as MME_MODELS
from mmengine.registry import OPTIMIZERS as MME_OPTIMIZERS
from mmengine.registry import RUNNERS as MME_RUNNERS
from mmengine.registry import TRANSFORMS as MME_TRANSFORMS
from mmengine.registry import Registry

from .compat.registry import Registry as MMCVRegistry
from .utils.errors import ConfigError, ConfigTypeError, config_error_for, did_you_mean


def _registry(name: str, parent: Optional[Registry], package: str) -> Registry:
    return Registry(name, parent=parent, scope='mtrain', locations=[package])


MODELS = _registry('model', MME_MODELS, 'mtrain.models')
DATASETS = _registry('dataset', MME_DATASETS, 'mtrain.datasets')
TRANSFORMS = _registry('transform', MME_TRANSFORMS, 'mtrain.datasets')
OPTIMIZERS = _registry('optimizer', MME_OPTIMIZERS, 'mtrain.optim')
OPTIMIZER_CONSTRUCTORS = _registry('optimizer constructor', None, 'mtrain.optim')
HOOKS = _registry('hook', MME_HOOKS, 'mtrain.hooks')
BATCH_PROCESSORS = _registry('batch processor', None, 'mtrain.processors')
RUNNERS = _registry('runner', MME_RUNNERS, 'mtrain.runner')
MODEL_WRAPPERS = _registry('model wrapper', MME_MODEL_WRAPPERS, 'mtrain.parallel')
# mmcv 1.x's runner constructors (``build_runner(cfg.runner)`` with a ``constructor`` key):
# a registry of mmcv's class, as 1.x code hangs its own under it.
RUNNER_BUILDERS = MMCVRegistry('runner builder', scope='mtrain')
# mmcv 1.x's init_cfg initializers ('Kaiming', 'Pretrained', ...): BaseModule.init_weights
INITIALIZERS = _registry('initializer', None, 'mtrain.models.initializers')
# torchvision's model builders, named 'torchvision.<builder>' (mmengine's scope
# syntax): filled on the first such lookup, so torchvision is imported only
# when a config names one of its models.
TORCHVISION_MODELS = Registry('torchvision model', parent=MODELS, scope='torchvision',
                              locations=['mtrain.models.torchvision_models'])


def registry_variable(registry: Registry) -> str:
    """The name to import the registry by (``OPTIMIZERS``), for messages."""
    for name, value in globals().items():
        if value is registry and name.isupper():
            return name
    return registry.name.upper().replace(' ', '_')


def registered_names(registry: Registry) -> list:
    """Names known to ``registry`` and its parents (what a config may name)."""
    registry.import_from_location()
    names = []
    while registry is not None:
        names.extend(registry.module_dict)
        registry = registry.parent
    return names


def lookup(type_name: str, registry: Registry, key: str) -> type:
    """The class registered as ``type_name``, or a :class:`ConfigError`."""
    registry.import_from_location()
    obj_cls = registry.get(type_name)
    if obj_cls is None:
        candidates = registered_names(registry)
        scope = Registry.split_scope_key(type_name)[0]
        if scope in registry.children:  # e.g. 'torchvision.resnet19'
            candidates = [f'{scope}.{n}' for n in registry.children[scope].module_dict]
        variable = registry_variable(registry)
        raise ConfigError(
            f"'{type_name}' is not a registered {registry.name} in mtrain's {variable} "
            f'registry.{did_you_mean(type_name, candidates)} If it is your own class, '
            f'register it with @{variable}.register_module() (from mtrain.registry import '
            f"{variable}) and load its module with custom_imports=dict(imports=['your.module']).",
            key=f'{key}.type')
    return obj_cls


def build(cfg: Dict[str, Any], registry: Registry, key: str,
          default_args: Optional[Dict[str, Any]] = None) -> Any:
    """Build ``cfg['type']`` from ``registry`` with the other keys as arguments.

    Args:
        cfg: a dict with a ``type`` (a registered name or a class).
        registry: where to look the type up.
        key: the config key path of ``cfg``, used in error messages.
        default_args: arguments used where ``cfg`` does not give them.

    Raises:
        ConfigError: unknown type, a keyword the class does not accept, or a
            value the class rejects; the message names ``key``.
    """
    if not isinstance(cfg, dict):
        raise ConfigError(f'expected a dict with a `type`, got {type(cfg).__name__}: {cfg!r}',
                          key=key)
    args = dict(cfg)
    if 'type' not in args:
        raise ConfigError(f'this dict has no `type`; add one, e.g. type=... (keys: {sorted(args)})',
                          key=key)
    obj_type = args.pop('type')
    for name, value in (default_args or {}).items():
        args.setdefault(name, value)
    obj_cls = lookup(obj_type, registry, key) if isinstance(obj_type, str) else obj_type
    if not callable(obj_cls):
        raise ConfigError(f'`type` must be a registered name or a class, got {obj_type!r}',
                          key=f'{key}.type')
    _check_keywords(obj_cls, args, key, internal=tuple(default_args or ()))
    try:
        return obj_cls(**args)
    except ConfigError as e:
        if e.key is not None and not e.key.startswith(key):
            # Raised by a build nested in this one (a pipeline step, a backbone):
            # its key is relative to this node, so prefix this node's path.
            raise type(e)(e.message, key=f'{key}.{e.key}', filename=e.filename) from e
        raise
    except (TypeError, ValueError, KeyError, AssertionError) as e:
        name = getattr(obj_cls, '__name__', str(obj_cls))
        # catchable as what it was (TypeError, AssertionError), as mmcv's build_from_cfg
        raise config_error_for(e)(f'building {name} failed: {type(e).__name__}: {e}',
                                  key=key) from e


def _check_keywords(obj_cls: Any, args: Dict[str, Any], key: str,
                    internal: tuple = ()) -> None:
    """Reject keywords the class does not accept, naming the closest accepted one.

    ``internal`` are the arguments mtrain passes itself (``default_args``): they
    are not the user's to set, so the "Accepted:" list leaves them out.
    """
    try:
        params = inspect.signature(obj_cls).parameters
    except (TypeError, ValueError):
        return
    accepted = [n for n, p in params.items()
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        # **kwargs usually go to a base class: accept what the bases accept.
        inherited = _base_class_keywords(obj_cls)
        if inherited is None:
            return
        accepted += inherited
    for name in args:
        if name not in accepted:
            cls_name = getattr(obj_cls, '__name__', str(obj_cls))
            shown = [n for n in dict.fromkeys(accepted) if n not in internal]  # unique, in order
            raise ConfigTypeError(  # mmcv: TypeError (an unexpected keyword argument)
                f"{cls_name} does not accept the argument '{name}'."
                f'{did_you_mean(name, shown)} Accepted: {", ".join(shown)}.',
                key=f'{key}.{name}')


def _base_class_keywords(obj_cls: Any) -> Optional[list]:
    """Keywords of the ``__init__``s up the MRO, or None when a base takes ``**kwargs`` too."""
    if not inspect.isclass(obj_cls):
        return None
    names: list = []
    for base in obj_cls.__mro__[1:]:
        init = base.__dict__.get('__init__')
        if init is None or base is object:
            continue
        try:
            params = inspect.signature(init).parameters
        except (TypeError, ValueError):
            return None
        names += [n for n, p in params.items() if n != 'self'
                  and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            return names
    return None
