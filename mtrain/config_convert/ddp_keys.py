"""``sync_bn`` and ``find_unused_parameters``: the top-level DDP keys, read differently.

mtrain's ``sync_bn`` is a bool (mmdet 2.x style, handed to
``MTDistributedDataParallel``); mmengine 0.10's Runner reads ``sync_bn`` as
the implementation, ``'torch'`` or ``'mmcv'``, and raises on anything else.
mtrain folds a top-level ``find_unused_parameters`` into ``model_wrapper``
unless it sets its own; mmengine's Runner reads the top-level key only when
there is no ``model_wrapper_cfg`` (``Runner.wrap_model``).
"""

from typing import Any, Dict

from .report import ConversionReport


def ddp_to_mmengine(src: Dict[str, Any], out: Dict[str, Any], report: ConversionReport) -> None:
    """After ``model_wrapper`` became ``out['model_wrapper_cfg']``."""
    if 'sync_bn' in src:
        value = src.pop('sync_bn')
        if value:
            out['sync_bn'] = value if isinstance(value, str) else 'torch'
            report.exact('sync_bn', f"sync_bn={out['sync_bn']!r}")
        else:
            report.exact('sync_bn', '(dropped: no conversion, the default)')
    if 'find_unused_parameters' in src:
        value = src.pop('find_unused_parameters')
        if 'model_wrapper_cfg' in out:
            out['model_wrapper_cfg'].setdefault('find_unused_parameters', value)
            report.exact('find_unused_parameters', 'model_wrapper_cfg.find_unused_parameters')
        else:
            out['find_unused_parameters'] = value
            report.exact('find_unused_parameters', 'find_unused_parameters')


def ddp_to_mmcv(src: Dict[str, Any], out: Dict[str, Any], report: ConversionReport) -> None:
    """Before ``model_wrapper_cfg`` is read (its presence decides the second key)."""
    if 'sync_bn' in src:
        value = src.pop('sync_bn')
        if value is not None:
            out['sync_bn'] = True
            if value == 'torch':
                report.exact('sync_bn', 'sync_bn=True')
            else:
                report.lossy('sync_bn', 'sync_bn=True', f"sync_bn={value!r}: mtrain converts "
                             "BatchNorm to torch's SyncBatchNorm only")
    if 'find_unused_parameters' in src:
        value = src.pop('find_unused_parameters')
        if 'model_wrapper_cfg' in src:
            report.note('find_unused_parameters', '(dropped)', "mmengine's Runner ignores it "
                        'beside model_wrapper_cfg (set it there)')
        else:
            out['find_unused_parameters'] = value
            report.exact('find_unused_parameters', 'find_unused_parameters')
