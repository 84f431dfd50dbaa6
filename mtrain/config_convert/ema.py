"""``EMAHook`` across the generations: mmcv 1.7.2's arguments ↔ mmengine 0.10's.

mmcv 1.7.2 (and mtrain): the average starts as the weights *before* training;
after the ``t``-th update (from 0, every ``interval``-th one) it moves by
``m = min(momentum ** interval, (1 + t) / (warm_up + t))`` towards the
weights. mmengine 0.10: ``EMAHook(ema_type, begin_iter, begin_epoch,
**averaged-model arguments)``; its ``ExponentialMovingAverage`` *copies* the
weights at its first update (``steps == 0``) and then moves by ``momentum``
every ``interval``-th step; ``MomentumAnnealingEMA`` uses ``max(momentum,
gamma / (gamma + steps))``, a *larger* step early where mmcv's warm-up makes
it smaller. Both weigh the current weights by ``momentum``.

No argument of either hook starts the average like the other's (mmcv mixes
the weights before training in with ``m < 1``; mmengine's averaged models all
copy), so every EMAHook conversion is lossy; the nearest translation keeps the
update schedule and momentum, and the difference (the initial weights' share,
``prod(1 - m)`` of ``p_init - p_0``) is measured in the table.
"""

from typing import Any, Dict, Optional

from .report import ConversionReport

#: Why no EMAHook conversion is exact (the report's reason, and the table's).
START = ("mmengine's averaged model copies the weights at its first update, mmcv's EMAHook "
         'starts from the weights before training and mixes the first update in with m < 1: '
         'no argument of either starts like the other')

_MMCV_DEFAULTS = dict(momentum=0.0002, interval=1, warm_up=100)
_ENGINE_AVERAGES = ('ExponentialMovingAverage', 'MomentumAnnealingEMA')


def warm_up_acts(momentum: float, interval: int, warm_up: float) -> bool:
    """Whether mmcv's ``(1 + t) / (warm_up + t)`` is below ``momentum ** interval`` at an
    update after the first (the ratio grows with ``t`` when ``warm_up > 1``)."""
    return warm_up > 1 and (1 + interval) / (warm_up + interval) < momentum ** interval


def ema_to_mmengine(hook: Dict[str, Any], key: str, report: ConversionReport
                    ) -> Dict[str, Any]:
    """mmcv's ``EMAHook`` → mmengine's ``EMAHook(ema_type='ExponentialMovingAverage')``."""
    args = {**_MMCV_DEFAULTS, **hook}
    interval = args['interval']
    out = dict(type='EMAHook', ema_type='ExponentialMovingAverage',
               momentum=args['momentum'] ** interval, interval=interval)
    if 'priority' in hook:
        out['priority'] = hook['priority']
    reasons = [START]
    if warm_up_acts(args['momentum'], interval, args['warm_up']):
        reasons.append(f"warm_up={args['warm_up']} makes the first updates smaller; mmengine's "
                       "MomentumAnnealingEMA makes them larger: dropped")
    if args.get('resume_from'):
        reasons.append("resume_from dropped: mmengine's load_from reads the checkpoint's "
                       'ema_state_dict')
    if args.get('evaluate_ema') is False:
        reasons.append('evaluate_ema=False (mtrain only): mmengine always validates the average')
    report.lossy(key, 'custom_hooks: EMAHook(ema_type=\'ExponentialMovingAverage\')',
                 '; '.join(reasons))
    return out


def ema_to_mmcv(hook: Dict[str, Any], key: str, report: ConversionReport
                ) -> Optional[Dict[str, Any]]:
    """mmengine's ``EMAHook`` → mmcv's (``None``: an average mmcv's hook cannot keep)."""
    args = dict(hook)
    kind = args.get('ema_type', 'ExponentialMovingAverage')
    if kind not in _ENGINE_AVERAGES:
        report.lossy(key, '(dropped)', f"ema_type='{kind}': mmcv's EMAHook keeps an "
                     'exponential moving average only')
        return None
    interval = args.get('interval', 1)
    # warm_up=1: (1 + t) / (1 + t) = 1, so m is momentum ** interval from the first update.
    out = dict(type='EMAHook', momentum=args.get('momentum', 0.0002) ** (1 / interval),
               interval=interval, warm_up=1)
    if 'priority' in args:
        out['priority'] = args['priority']
    reasons = [START]
    if kind == 'MomentumAnnealingEMA':
        reasons.append(f"MomentumAnnealingEMA's gamma={args.get('gamma', 100)} makes the first "
                       "updates larger; mmcv's warm_up makes them smaller: dropped")
    if args.get('begin_iter') or args.get('begin_epoch'):
        reasons.append('begin_iter/begin_epoch dropped: mmcv averages from the first update')
    if args.get('update_buffers'):
        reasons.append('update_buffers=True dropped: mmcv averages parameters only')
    report.lossy(key, 'custom_hooks: EMAHook(momentum, interval, warm_up=1)', '; '.join(reasons))
    return out
