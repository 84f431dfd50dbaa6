"""mmengine scheduler chains that are one mmcv 1.x policy: read them back.

``schedule_to_mmengine`` writes some mmcv policies as several schedulers
(Cyclic and OneCycle momentum as cosine phases, a step policy's ``min_lr`` as a
landing milestone). Reading such a chain back guesses the mmcv policy from
its first entries, then writes that guess forward again: the guess is taken
only if it regenerates the chain, value for value, so a chain that merely
looks alike stays lossy.
"""

import copy
import math
from typing import Any, Callable, Dict, List, Optional, Tuple

from .report import ConversionReport
from .schedule_cycles import cyclic, one_cycle_momentum
from .schedule_to_mmengine import lr_schedulers

Loop = Tuple[bool, int]


def composed_policy(schedulers: List[dict], loop: Loop, kind: str, base_lr: Optional[float],
                    optimizer: Optional[Dict[str, Any]]) -> Optional[dict]:
    """The mmcv policy dict the chain ``schedulers`` was written from, or None."""
    guesses: List[Tuple[Callable, Callable]] = [
        (_cyclic_guess, lambda cfg, r: cyclic(dict(cfg), loop, r, 'k', kind))]
    if kind == 'LR':
        guesses.append((_step_floor_guess,
                        lambda cfg, r: lr_schedulers(cfg, loop, r, base_lr)))
    else:
        guesses.append((_one_cycle_guess, lambda cfg, r: one_cycle_momentum(
            cfg, loop, r, 'k', copy.deepcopy(optimizer))))
    for guess, forward in guesses:
        try:
            cfg = guess(schedulers, loop, base_lr, optimizer)
        except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError):
            cfg = None
        if cfg is None:
            continue
        report = ConversionReport('mmcv 1.x', 'mmengine')
        if _same(forward(cfg, report), schedulers) and not report.is_lossy:
            return cfg
    return None


def _cyclic_guess(schedulers, loop, base_lr, optimizer) -> Optional[dict]:
    up_phase, down_phase = schedulers[0], schedulers[1]
    if loop[0] or not up_phase['type'].startswith('CosineAnnealing'):
        return None
    up, per_cycle = up_phase['T_max'], down_phase['end'] - 1
    top, bottom = up_phase['eta_min_ratio'], down_phase['eta_min_ratio']
    gamma = 1.
    if len(schedulers) > 3 and top != 1:  # the second cycle's peak: 1 - gamma + top * gamma
        gamma = (schedulers[2]['eta_min_ratio'] - 1) / (top - 1)
    ratio = up / per_cycle if int(up / per_cycle * per_cycle) == up else \
        (up + 0.5) / per_cycle
    return dict(policy='cyclic', target_ratio=(top, bottom), cyclic_times=loop[1] // per_cycle,
                step_ratio_up=ratio, gamma=gamma, by_epoch=False)


def _step_floor_guess(schedulers, loop, base_lr, optimizer) -> Optional[dict]:
    decay, landing = schedulers
    if base_lr is None or decay['type'] != 'MultiStepLR' or landing['type'] != 'MultiStepLR':
        return None
    gamma = decay.get('gamma', 0.1)
    floor = base_lr * gamma ** len(decay['milestones']) * landing['gamma']
    return dict(policy='step', step=list(decay['milestones']) + list(landing['milestones']),
                gamma=gamma, min_lr=floor, by_epoch=decay.get('by_epoch', True))


def _one_cycle_guess(schedulers, loop, base_lr, optimizer) -> Optional[dict]:
    if loop[0] or len(schedulers) not in (2, 3):
        return None
    first = schedulers[0]['end'] - 1
    cfg = dict(policy='OneCycle', base_momentum=schedulers[0]['eta_min'],
               max_momentum=schedulers[1]['eta_min'], pct_start=(first + 1) / loop[1],
               by_epoch=False)
    if len(schedulers) == 3:
        cfg['three_phase'] = True
    if schedulers[0]['type'] == 'PolyMomentum':
        cfg['anneal_strategy'] = 'linear'
    start = (optimizer or {}).get('betas', [None])[0] if 'betas' in (optimizer or {}) else \
        (optimizer or {}).get('momentum')
    return cfg if start == cfg['max_momentum'] else None


def _same(a: Any, b: Any) -> bool:
    """Equal configs, floats to a relative 1e-9 (the guess recomputes them)."""
    if isinstance(a, dict) and isinstance(b, dict):
        a = {k: v for k, v in a.items() if not k.startswith('_')}
        b = {k: v for k, v in b.items() if not k.startswith('_')}
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and \
            math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-15)
    return a == b
