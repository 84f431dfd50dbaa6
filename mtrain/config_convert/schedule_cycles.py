"""Cyclic and one-cycle momentum policies as chains of mmengine phase schedulers.

mmengine has no cyclic scheduler and its ``OneCycleLR`` sets only the lr,
but each phase of these mmcv policies is a cosine between two values, and
mmengine's chained ``CosineAnnealing*`` reproduces a cosine exactly when it
starts at the phase's first value and its ``T_max`` is the phase length:

* a phase ``[b, e)`` becomes ``CosineAnnealing*(T_max=e - b, begin=b, end=e + 1)``:
  at step ``e`` it lands exactly on its ``eta_min`` (``1 + cos(pi) = 0``), where
  the next phase (listed after it, starting at ``e``) takes over;
* where mmcv jumps (a new cycle starts again at the initial value),
  ``MultiStep*`` multiplies the landed value back (``gamma = 1 / ratio``).

The phase bounds must be whole iterations, so the policy must know the run
length: an ``IterBasedRunner`` (``max_iters``) for Cyclic; for OneCycle,
``pct_start * max_iters`` must be whole. Checked against mmengine's Runner in
tests/config_convert/test_verdict_evidence.py.
"""

import math
from typing import Any, Dict, List, Optional, Tuple

from .report import ConversionReport

Loop = Tuple[bool, int]


def _ratio_pair(target: Any) -> Tuple[float, float]:
    """mmcv's ``target_ratio``: a number ``r`` means ``(r, r / 1e5)``."""
    if isinstance(target, (int, float)):
        return float(target), float(target) / 1e5
    return float(target[0]), float(target[1])


def cyclic(cfg: Dict[str, Any], loop: Loop, report: ConversionReport, key: str,
           kind: str = 'LR', default_target: Tuple[float, float] = (10, 1e-4)) -> List[dict]:
    """mmcv's ``policy='Cyclic'`` (LR or momentum) as per-phase cosine schedulers."""
    loop_by_epoch, length = loop
    why = None
    if loop_by_epoch:
        why = ('under EpochBasedRunner the cycle length (max_iters // cyclic_times) depends '
               'on the loader length, which the config does not state')
    elif cfg.get('anneal_strategy', 'cos') != 'cos':
        why = ("anneal_strategy='linear' would need Linear* end factors above 1, which "
               'mmengine rejects')
    per_cycle = length // cfg.get('cyclic_times', 1) if not loop_by_epoch else 0
    up = int(cfg.get('step_ratio_up', 0.4) * per_cycle)
    if why is None and (up == 0 or per_cycle < 2):
        why = 'a cycle without a rising phase starts with a jump no chained scheduler makes'
    if why is not None:
        report.lossy(key, '(dropped)', f'Cyclic: {why}')
        return []
    top, bottom = _ratio_pair(cfg.get('target_ratio', default_target))
    gamma = cfg.get('gamma', 1.)
    schedulers = []
    for cycle in range(math.ceil(length / per_cycle)):
        start, scale = cycle * per_cycle, gamma ** cycle
        peak = 1 - scale + top * scale  # mmcv: the peak moves towards 1 as cycles pass
        schedulers.append(_cos_phase(kind, start, start + up, eta_min_ratio=peak))
        schedulers.append(_cos_phase(kind, start + up, start + per_cycle,
                                     eta_min_ratio=bottom))
    starts = list(range(per_cycle, length, per_cycle))
    if starts:
        schedulers.append(dict(type=f'MultiStep{kind}', milestones=starts, gamma=1 / bottom,
                               by_epoch=False, begin=0, end=length))
    report.exact(key, f'CosineAnnealing{kind} per phase (eta_min_ratio = the phase\'s target) '
                 f'+ MultiStep{kind} back to the initial value at each new cycle')
    return schedulers


def _cos_phase(kind: str, begin: int, end: int, **floor: float) -> dict:
    return dict(type=f'CosineAnnealing{kind}', T_max=end - begin, **floor, by_epoch=False,
                begin=begin, end=end + 1)


def _linear_phase(begin: int, end: int, eta_min: float) -> dict:
    # PolyMomentum(power=1) is a straight line to eta_min in either direction; LinearMomentum
    # would need an end factor above 1 for the rise.
    return dict(type='PolyMomentum', power=1., eta_min=eta_min, by_epoch=False, begin=begin,
                end=end + 1)


def one_cycle_momentum(cfg: Dict[str, Any], loop: Loop, report: ConversionReport, key: str,
                       optimizer: Optional[Dict[str, Any]]) -> List[dict]:
    """mmcv's ``OneCycle`` momentum: ``max → base (→ max) [→ max]`` phase schedulers.

    mmcv replaces each group's momentum by ``max_momentum`` when the run starts;
    here the optimizer's ``momentum`` (``betas[0]``) is written as ``max_momentum``.
    """
    loop_by_epoch, length = loop
    low, high = cfg.get('base_momentum', 0.85), cfg.get('max_momentum', 0.95)
    pct = cfg.get('pct_start', 0.3)
    first = pct * length - 1
    why = None
    if loop_by_epoch:
        why = 'under EpochBasedRunner the run length in iterations is not in the config'
    elif not all(isinstance(v, (int, float)) for v in (low, high)):
        why = 'per-group base_momentum/max_momentum (lists or dicts)'
    elif abs(first - round(first)) > 1e-6 or round(first) < 1:
        why = (f'pct_start * max_iters - 1 = {first:g} is not a whole iteration: mmcv\'s '
               'phase boundary falls between steps, a chained scheduler\'s cannot')
    elif optimizer is None or not _set_momentum(optimizer, high):
        why = 'the optimizer has no momentum or betas to start from max_momentum'
    if why is not None:
        report.lossy(key, '(dropped)', f'OneCycle momentum: {why}')
        return []
    first = int(round(first))
    bounds = [(0, first, low), (first, 2 * first if cfg.get('three_phase') else length - 1,
                                high)]
    if cfg.get('three_phase'):
        bounds.append((2 * first, length - 1, high))
    linear = cfg.get('anneal_strategy', 'cos') == 'linear'
    report.exact(key, 'optimizer momentum = max_momentum, then one '
                 f"{'PolyMomentum(power=1)' if linear else 'CosineAnnealingMomentum'} per "
                 'phase')
    return [_linear_phase(b, e, target) if linear else
            _cos_phase('Momentum', b, e, eta_min=target) for b, e, target in bounds if e > b]


def _set_momentum(optimizer: Dict[str, Any], value: float) -> bool:
    if 'betas' in optimizer:
        optimizer['betas'] = (value, tuple(optimizer['betas'])[1])
        return True
    if optimizer.get('type') in ('SGD', 'RMSprop') or 'momentum' in optimizer:
        optimizer['momentum'] = value
        return True
    return False
