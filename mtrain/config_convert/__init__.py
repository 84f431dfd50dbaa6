"""Both config generations: detect a config's schema, convert between them.

``mmcv 1.x`` (mtrain's own: ``optimizer``, ``lr_config``, ``runner``, ...) and
``mmengine`` (``optim_wrapper``, ``param_scheduler``, ``train_cfg``, ...)::

    from mtrain.config_convert import convert
    new_cfg, report = convert(cfg.to_dict(), to='mmengine')
    print(report.format())        # every key, and why anything is lossy

:func:`for_training` is what ``tools/train.py`` uses to train from an mmengine
config: the runtime sections become mtrain's, while ``param_scheduler`` runs on
mmengine's own scheduler classes (:class:`~mtrain.hooks.ParamSchedulerHook`).
"""

import logging
from typing import Any, Dict, Optional, Tuple

from ..utils.errors import ConfigError
from .report import ConversionReport, Entry
from .table import MMCV_KEYS, MMENGINE_KEYS, UNSUPPORTED, mapping_markdown
from .to_mmcv import to_mmcv
from .to_mmengine import to_mmengine

__all__ = ['ConversionReport', 'Entry', 'convert', 'detect_schema', 'for_training',
           'mapping_markdown', 'to_mmcv', 'to_mmengine']


def detect_schema(cfg: Dict[str, Any]) -> str:
    """``'mmengine'`` or ``'mmcv'`` (the default for a config with neither's keys).

    Raises:
        ConfigError: keys of both schemas, e.g. ``optimizer`` and ``optim_wrapper``.
    """
    engine = [k for k in MMENGINE_KEYS if k in cfg]
    mmcv = [k for k in MMCV_KEYS if k in cfg]
    wrapper = cfg.get('optim_wrapper')
    if mmcv == ['optimizer'] and isinstance(wrapper, dict) and 'optimizer' in wrapper:
        mmcv = []  # mmseg 1.x schedules: `optimizer` is a variable that optim_wrapper reuses
    if engine and mmcv:
        raise ConfigError(f'the config mixes the mmcv 1.x keys {mmcv} with the mmengine keys '
                          f'{engine}; write one schema (tools/convert_config.py converts)',
                          key=engine[0])
    return 'mmengine' if engine else 'mmcv'


def convert(cfg: Dict[str, Any], to: str, metric_classes: Optional[Dict[str, str]] = None
            ) -> Tuple[Dict[str, Any], ConversionReport]:
    """Convert ``cfg`` (either schema, ``_base_`` resolved) to the schema ``to``.

    ``metric_classes`` (to mmengine): 1.x metric name → registered metric class.

    Raises:
        ValueError: ``to`` is neither ``'mmengine'`` nor ``'mmcv'``, or the
            config already is in that schema.
    """
    if to not in ('mmengine', 'mmcv'):
        raise ValueError(f"--to must be 'mmengine' or 'mmcv', got {to!r}")
    source = detect_schema(cfg)
    if source == to:
        raise ValueError(f'the config already is in the {to} schema')
    return to_mmengine(cfg, metric_classes) if to == 'mmengine' else to_mmcv(cfg)


def for_training(cfg: Dict[str, Any]) -> Dict[str, Any]:
    """An mmengine config as mtrain trains it (``param_scheduler`` kept for mmengine).

    What mtrain cannot honour is logged as a warning; mmengine-only features
    it cannot run at all (``strategy``, ``runner_type``, ``compile.target``)
    raise :class:`ConfigError` naming the key.
    """
    for key, reason in UNSUPPORTED.items():
        if key in cfg:
            raise ConfigError(reason, key=key)
    compile_cfg = cfg.get('compile')
    if isinstance(compile_cfg, dict) and compile_cfg.get('target', 'train_step') != 'train_step':
        raise ConfigError(UNSUPPORTED['cfg.compile.target'], key='compile.target')
    converted, report = to_mmcv(cfg, keep_schedulers=True)
    logger = logging.getLogger('mtrain')
    for entry in report.lossy_entries:
        logger.warning(f'mmengine config: {entry.source}: {entry.reason}')
    return converted
