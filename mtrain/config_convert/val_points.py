"""Which epochs (or iterations) get validated: mmcv 1.7.2's ``EvalHook`` vs mmengine 0.10's loops.

The two rules, counting epochs (iterations) from 1 as both frameworks' logs do,
``n`` the run length (``max_epochs`` / ``max_iters``):

* mmcv ``evaluation=dict(start=s, interval=k)`` (``EvalHook._should_evaluate``):
  ``s=None``: every ``e % k == 0``; else every ``e >= s`` with ``(e - s) % k == 0``.
  ``s=0, k=1`` also evaluates once before training (``before_train_epoch``,
  point ``0``); mmcv 1.7.2 gives no warning for ``s < k``.
* mmengine ``train_cfg=dict(val_begin=b, val_interval=k)``
  (``EpochBasedTrainLoop.run`` / ``IterBasedTrainLoop.run``): every ``e >= b``
  with ``e % k == 0 or e == n`` — the last epoch always, once ``b <= n``.

A translation is exact when the two lists are equal for the run's length,
which this module searches for in closed form; otherwise the conversion
reports both lists (:func:`describe`).
"""

from typing import Any, Dict, List, Optional, Tuple

from .report import ConversionReport


def mmcv_points(start: Optional[int], interval: int, length: int) -> List[int]:
    """The epochs (iterations) mmcv 1.7.2's EvalHook evaluates after, 0 = before training."""
    if start is None:
        return list(range(interval, length + 1, interval))
    first = start if start >= 1 else interval  # start=0: (e - 0) % k, from e = k on
    points = list(range(first, length + 1, interval))
    return ([0] if start == 0 and interval == 1 else []) + points


def mmengine_points(begin: int, interval: int, length: int) -> List[int]:
    """The epochs (iterations) mmengine 0.10's train loops validate after."""
    first = -(-max(begin, 1) // interval) * interval  # the first multiple from begin on
    points = list(range(first, length + 1, interval))
    return points + [length] if begin <= length and points[-1:] != [length] else points


def to_mmengine_rule(start: Optional[int], interval: int, length: int
                     ) -> Optional[Tuple[int, int]]:
    """``(val_begin, val_interval)`` validating at the same points as mmcv's, None: none does."""
    want = mmcv_points(start, interval, length)
    if not want:
        return length + 1, interval  # never: val_begin past the end
    if 0 in want or want[-1] != length:
        return None  # mmengine never validates before training, always after the last
    first = want[0]
    # multiples of mmcv's interval from `first` on, or `first` alone before the last
    for step in (interval, first):
        if mmengine_points(first, step, length) == want:
            return (1 if mmengine_points(1, step, length) == want else first), step
    return None


def to_mmcv_rule(begin: int, interval: int, length: int
                 ) -> Optional[Tuple[Optional[int], int]]:
    """``(start, interval)`` for mmcv's EvalHook at mmengine's points, None: none does.

    ``start`` is None where mmcv's default (multiples of the interval) already matches.
    """
    want = mmengine_points(begin, interval, length)
    if not want:
        return length + 1, interval
    steps = {b - a for a, b in zip(want, want[1:])}
    if len(steps) > 1:
        return None  # the multiples, then a shorter last step: not one progression
    step = steps.pop() if steps else interval
    start = None if want[0] == step else want[0]
    return (start, step) if mmcv_points(start, step, length) == want else None


def describe(points: List[int], unit: str) -> str:
    """A short list for a report: ``epochs [2, 4, 6, ..., 98, 100] (50)``."""
    shown = points if len(points) <= 8 else [*points[:3], '...', *points[-2:]]
    text = '[' + ', '.join(str(p) for p in shown) + ']'
    return f"{unit}s {text}" + (f' ({len(points)})' if len(points) > 8 else '') + (
        f' ({unit} 0: before training)' if points[:1] == [0] else '')


def val_rule_to_mmengine(start: Optional[int], interval: int, loop: Tuple[bool, int],
                         report: ConversionReport) -> Dict[str, int]:
    """``train_cfg``'s ``val_interval`` (and ``val_begin``) for mmcv's ``evaluation``, reported.

    ``loop`` is ``(by_epoch, length)``; lossy (both lists in the reason) where no
    ``val_begin``/``val_interval`` validates at mmcv's points; the nearest rule
    (same start and interval) is written then.
    """
    rule = to_mmengine_rule(start, interval, loop[1])
    key = 'evaluation.interval' if start is None else 'evaluation.start'
    if rule is None:
        rule = (max(start or 1, 1), interval)
        unit = _unit(loop)
        report.lossy(key, 'train_cfg.val_begin, val_interval', f'mmcv evaluates after '
                     f'{describe(mmcv_points(start, interval, loop[1]), unit)}, mmengine '
                     f'would after {describe(mmengine_points(*rule, loop[1]), unit)}: no '
                     f'val_begin/val_interval matches (mmengine always validates after the '
                     f'last {unit}, never before training)')
    else:
        report.exact(key, f'train_cfg.val_begin={rule[0]}, val_interval={rule[1]}')
    return dict(val_interval=rule[1], **({} if rule[0] == 1 else dict(val_begin=rule[0])))


def val_rule_to_mmcv(begin: int, interval: int, loop: Tuple[bool, int],
                     report: ConversionReport, training: bool) -> Dict[str, Any]:
    """``evaluation``'s ``interval`` (and ``start``) for mmengine's ``val_begin``/``val_interval``.

    ``training`` (mtrain training the mmengine config itself): where mmcv's rule
    cannot match, mtrain's EvalHook follows mmengine's (``mmengine_rule=True``),
    exact; a converted mmcv 1.x config has no such key, so that is lossy.
    """
    rule = to_mmcv_rule(begin, interval, loop[1])
    key = 'train_cfg.val_interval' if begin == 1 else 'train_cfg.val_begin'
    if rule is not None:
        report.exact(key, f'evaluation.start={rule[0]}, interval={rule[1]}')
        return dict(interval=rule[1], **({} if rule[0] is None else dict(start=rule[0])))
    if training:
        report.exact(key, 'evaluation (mmengine_rule=True)')
        return dict(interval=interval, start=begin, mmengine_rule=True)
    start = begin if begin > 1 else None
    unit = _unit(loop)
    report.lossy(key, 'evaluation.start, interval', f'mmengine validates after '
                 f'{describe(mmengine_points(begin, interval, loop[1]), unit)}, mmcv would '
                 f'after {describe(mmcv_points(start, interval, loop[1]), unit)}: no '
                 f'start/interval matches (mmcv evaluates at start + i * interval only)')
    return dict(interval=interval, **({} if start is None else dict(start=start)))


def _unit(loop: Tuple[bool, int]) -> str:
    return 'epoch' if loop[0] else 'iteration'
