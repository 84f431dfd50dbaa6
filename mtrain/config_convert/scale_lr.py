"""``auto_scale_lr`` across the generations: mmengine's Runner applies it, mmcv 1.7.2 does not.

mmengine 0.10's ``Runner.scale_lr`` multiplies every group's lr by
``world_size * train batch size / base_batch_size`` when ``enable=True``;
mmcv 1.7.2 (and so mtrain) has no such step: the key is accepted and has no
effect (mmdet 2.x's own train script applied it, outside mmcv). So the key
carries over exactly while it is off, and is lossy when on: the factor needs
the world size, which a config does not state.
"""

from typing import Any, Dict

from .report import ConversionReport

_WHY = {'mmengine': "mmcv 1.7.2 (and mtrain) ignores it; mmengine's Runner scales every lr by "
                    'world_size x batch_size / base_batch_size',
        'mmcv 1.x': "mmengine's Runner scales every lr by world_size x batch_size / "
                    'base_batch_size; mtrain (as mmcv 1.7.2) ignores the key: scale '
                    'optimizer.lr yourself for the world size you train with'}


def carry_auto_scale_lr(src: Dict[str, Any], out: Dict[str, Any],
                        report: ConversionReport) -> None:
    """Copy ``auto_scale_lr``; exact while ``enable`` is off, else lossy with why."""
    if 'auto_scale_lr' not in src:
        return
    value = out['auto_scale_lr'] = src.pop('auto_scale_lr')
    if isinstance(value, dict) and value.get('enable', False):
        report.lossy('auto_scale_lr', 'auto_scale_lr', f'enable=True: {_WHY[report.target_schema]}')
    else:
        report.exact('auto_scale_lr', 'auto_scale_lr')
