"""mmengine ``param_scheduler`` → mmcv 1.x ``lr_config``/``momentum_config``.

mmcv expresses one policy over the whole run plus an optional warmup, so a
chain converts exactly when it is ``[warmup] + [one scheduler from step 0 to the
end of the run]``: a ``LinearLR``/``ConstantLR`` by iteration from step 0 is the
warmup (``warmup_iters = end - 1``), the rest maps by :data:`_LR_POLICY`. The chains
``schedule_to_mmengine`` writes for one mmcv policy (Cyclic, OneCycle momentum, a step
policy's ``min_lr``) are read back by :mod:`.schedule_composed`. Any
other ``begin``/``end`` chain is reported lossy (the nearest policy is still
written, for ``--allow-lossy``). See ``schedule_to_mmengine`` for why some
values shift by one.
"""

from typing import Any, Dict, List, Optional, Tuple

from ..defaults import mmengine_scheduler_end
from .report import ConversionReport
from .schedule_composed import composed_policy
from .table import NO_COUNTERPART

Loop = Tuple[bool, int]

_INF_LIKE = 10**12


def split_schedulers(schedulers: Any) -> Tuple[List[dict], List[dict]]:
    """``(lr schedulers, momentum schedulers)`` of a ``param_scheduler`` value."""
    items = [schedulers] if isinstance(schedulers, dict) else list(schedulers or [])
    lr = [dict(s) for s in items if 'Momentum' not in s.get('type', '')]
    momentum = [dict(s) for s in items if 'Momentum' in s.get('type', '')]
    return lr, momentum


def lr_config(schedulers: List[dict], loop: Loop, report: ConversionReport,
              base_lr: Optional[float] = None) -> Optional[dict]:
    """The ``lr_config`` for a list of LR scheduler dicts (``None``: constant lr).

    ``base_lr``: the one base lr of every param group, when there is one.
    """
    return _policy_config(schedulers, loop, report, 'LR', base_lr)


def per_parameter_lists(schedulers: Any, out: Dict[str, Any], report: ConversionReport) -> Any:
    """OneCycle's per-group ``eta_max`` list in mmengine's layout → mtrain's, and the groups to match.

    Under ``paramwise_cfg`` mmengine has one param group per parameter plus the
    base-settings group its ``OptimWrapper`` adds (the list's last entry, which
    only sets the logged base lr); mtrain keeps one group per parameter with
    ``merge_groups=False``, in the same order.
    """
    if not isinstance(schedulers, (list, tuple)):
        return schedulers
    schedulers = [dict(s) for s in schedulers]
    for i, s in enumerate(schedulers):
        if s.get('type', '').startswith('OneCycle') and isinstance(s.get('eta_max'), (
                list, tuple)) and len(s['eta_max']) > 1:
            s['eta_max'] = list(s['eta_max'][:-1])
            optimizer = out.get('optimizer')
            if isinstance(optimizer, dict):
                optimizer['paramwise_cfg'] = dict(optimizer.get('paramwise_cfg') or {},
                                                  merge_groups=False)
            report.note(f'param_scheduler.{i}.eta_max', 'max_lr, paramwise_cfg.merge_groups'
                        '=False', "one value per parameter, as mmengine's groups; its last "
                        "entry, for mmengine's base-settings group, dropped")
    return schedulers


def momentum_config(schedulers: List[dict], loop: Loop, report: ConversionReport,
                    optimizer: Optional[Dict[str, Any]] = None) -> Optional[dict]:
    """The ``momentum_config`` for a list of momentum scheduler dicts (``None``: constant).

    mtrain's momentum warmup multiplies by the LR warmup's factor (mmcv 1.7.2
    divides; docs/migration.md), so the LR warmup's schedulers map onto it.
    ``optimizer``: the converted optimizer (OneCycle's phases start from its momentum).
    """
    return _policy_config(schedulers, loop, report, 'Momentum', optimizer=optimizer)


def _policy_config(schedulers: List[dict], loop: Loop, report: ConversionReport, kind: str,
                   base_lr: Optional[float] = None,
                   optimizer: Optional[Dict[str, Any]] = None) -> Optional[dict]:
    """``[warmup] + [one policy]`` of ``kind`` ('LR' or 'Momentum'), the rest reported lossy."""
    name, section = ('lr', 'lr_config') if kind == 'LR' else ('momentum', 'momentum_config')
    schedulers = [dict(s, _base_lr=base_lr) for s in schedulers]
    cfg: Dict[str, Any] = {}
    if _is_exp_warmup(schedulers, kind):
        cfg.update(_exp_warmup(schedulers.pop(0), schedulers.pop(0), report, section))
    elif schedulers and _is_warmup(schedulers[0], kind):
        cfg.update(_warmup(schedulers.pop(0), report, section))
    composed = composed_policy(schedulers, loop, kind, base_lr, optimizer) \
        if len(schedulers) > 1 else None
    if composed is not None:
        report.exact('param_scheduler', f"{section}.policy='{composed['policy']}' (the chain "
                     'the converter writes for it, read back)')
        if cfg:
            _warmup_commutes(composed, cfg, report, name)
        return dict(**composed, **cfg)
    if len(schedulers) > 1:
        report.lossy('param_scheduler', section, f'{len(schedulers) + bool(cfg)} chained '
                     f'{kind} schedulers: mmcv has one policy plus a warmup; only the first '
                     'is kept: ' + ', '.join(s['type'] for s in schedulers))
    if not schedulers:
        if cfg and kind == 'Momentum':
            report.lossy('param_scheduler', section, 'a momentum warmup with no momentum '
                         "policy: mtrain's momentum warmup belongs to a policy hook")
            return None
        return dict(policy='Fixed', **cfg) if cfg else None
    main = _main(schedulers[0], loop, report, kind, name)
    if main is not None and cfg:
        _warmup_commutes(main, cfg, report, name)
    return dict(**(main or dict(policy='Fixed')), **cfg)


def _warmup_commutes(main: Dict[str, Any], warmup: Dict[str, Any],
                     report: ConversionReport, name: str = 'lr') -> None:
    """Report where mmcv's warmup × closed-form lr differs from mmengine's chained steps.

    mmengine's cosine and poly schedulers with a floor (and restarts) update the
    current lr, which includes the warmup factor while the warmup lasts, so
    the product does not commute (checked against mmengine's Runner in
    tests/config_convert/test_schedules.py). By epoch the first such step
    comes at the end of epoch 1: exact if the warmup is over by then, which
    depends on the loader's length, not written in the config.
    """
    floor = main.get(f'min_{name}') or main.get(f'min_{name}_ratio')
    if main['policy'] == 'OneCycle':
        report.lossy('param_scheduler', 'lr_config', "mmengine's OneCycleLR overwrites the "
                     "warmup's lr; mmcv multiplies the warmup factor onto it")
    elif main['policy'] in ('CosineRestart', 'cyclic') or (floor and main['policy'] in (
            'CosineAnnealing', 'poly')):
        when = (f"the warmup's {warmup['warmup_iters'] + 1} iterations outlast the first "
                'epoch (exact only if an epoch has at least that many iterations, which the '
                'config does not state)' if main['by_epoch'] else 'both act at once')
        report.lossy('param_scheduler', 'lr_config', f"a warmup under {main['policy']}"
                     + (' with a floor' if floor else '') + ': mmengine chains the two by '
                     'updating the current lr, mmcv multiplies the warmup factor onto the '
                     f'closed-form lr; they differ when {when}')


def _is_warmup(s: dict, kind: str = 'LR') -> bool:
    """A ``Linear*``/``Constant*`` from step 0 that stops: a warmup (by epoch too).

    A rising ``Linear*`` (``end_factor=1``) is a linear warmup even alone (under
    ``policy='Fixed'``): mmcv's ``LinearAnnealing`` starts at the base value.
    """
    if s.get('begin', 0) != 0 or 'end' not in s:
        return False
    by_iter = not s.get('by_epoch', True)
    if s.get('type') == f'Linear{kind}':
        return (by_iter or s.get('convert_to_iter_based', False)) and \
            s.get('end_factor', 1.0) == 1.0 and s.get('start_factor', 1 / 3) != 1.0
    return s.get('type') == f'Constant{kind}'


def _is_exp_warmup(schedulers: List[dict], kind: str = 'LR') -> bool:
    """``Linear*`` acting at step 0 only, then ``Exponential*`` back to 1: mmcv's exp warmup."""
    if len(schedulers) < 2:
        return False
    first, second = schedulers[0], schedulers[1]
    by_iter = all(not s.get('by_epoch', True) and s.get('begin', 0) == 0 for s in (first, second))
    if not (by_iter and first.get('type') == f'Linear{kind}' and first.get('end') == 1
            and second.get('type') == f'Exponential{kind}' and second.get('end', 0) > 1):
        return False
    ratio, iters = first.get('start_factor', 1 / 3), second['end'] - 1
    return abs(ratio * second['gamma'] ** iters - 1) < 1e-9


def _exp_warmup(first: dict, second: dict, report: ConversionReport,
                section: str = 'lr_config') -> Dict[str, Any]:
    report.exact(f"param_scheduler: {first['type']}(end=1) + {second['type']}",
                 f"{section}.warmup='exp' (ratio × gamma ** t = ratio ** (1 - t / "
                 'warmup_iters))')
    return dict(warmup='exp', warmup_iters=second['end'] - 1,
                warmup_ratio=first.get('start_factor', 1 / 3))


def _warmup(s: dict, report: ConversionReport, section: str = 'lr_config') -> Dict[str, Any]:
    kind = 'linear' if s['type'].startswith('Linear') else 'constant'
    ratio = s.get('start_factor', 1 / 3) if kind == 'linear' else s.get('factor', 1 / 3)
    key = f"param_scheduler: {s['type']}"
    if not s.get('by_epoch', True):
        report.exact(key, f"{section}.warmup='{kind}' (warmup_iters = end - 1: mmengine "
                     'reaches the full value at end - 1)')
        return dict(warmup=kind, warmup_iters=s['end'] - 1, warmup_ratio=ratio)
    if kind == 'constant' and not s.get('convert_to_iter_based', False):
        report.exact(key, f"{section}.warmup='constant', warmup_by_epoch=True "
                     '(warmup_iters = end - 1 epochs)')
        return dict(warmup=kind, warmup_iters=s['end'] - 1, warmup_ratio=ratio,
                    warmup_by_epoch=True)
    report.lossy(key, f"{section}.warmup='{kind}', warmup_by_epoch=True",
                 NO_COUNTERPART[f"warmup_by_epoch ('{kind}')"])
    return dict(warmup=kind, warmup_iters=s['end'], warmup_ratio=ratio, warmup_by_epoch=True)


def _main(s: dict, loop: Loop, report: ConversionReport, kind: str,
          name: str) -> Optional[dict]:
    stype = s.pop('type')
    key = f'param_scheduler: {stype}'
    by_epoch = s.pop('by_epoch', True)
    loop_by_epoch, length = loop
    if by_epoch and not loop_by_epoch:
        _by_epoch_in_iteration_loop(s, length, report, key)
    if s.pop('convert_to_iter_based', False) and by_epoch:
        by_epoch = False
        if any(k in s for k in ('milestones', 'step_size', 'periods', 'total_steps')) or \
                stype.startswith(('Poly', 'Linear')):
            report.lossy(key, 'lr_config', 'convert_to_iter_based scales epochs by the '
                         'loader length, which the config does not state')
    begin, end = s.pop('begin', 0), s.pop('end', None)
    run_end = length if by_epoch == loop_by_epoch else None
    s.pop('verbose', None)
    base = stype[:-len(kind)] if stype.endswith(kind) else stype
    if begin == -1 and end is None and base in ('Poly', 'Linear'):
        # What schedule_to_mmengine writes for a whole run by iteration in an epoch loop:
        # the Runner fills in end = max_iters, so end - begin - 1 = max_iters, mmcv's
        # closed form. Stated to the builders as "ends one step after the run's end".
        begin, end, run_end = 0, 0, -1
    if begin != 0 and stype == 'CosineAnnealingLR' and run_end is not None:
        return _flat_cosine(s, begin, end, run_end, by_epoch, report, key)
    if begin != 0:
        report.lossy(key, 'lr_config', f'begin={begin}: mmcv policies start at step 0')
    builder = _BUILDERS.get(base)
    if kind == 'Momentum' and base not in ('Step', 'MultiStep', 'CosineAnnealing', 'Linear'):
        builder = None
    if builder is None:
        report.lossy(key, '(dropped)', f'{stype} has no mmcv 1.x policy')
        return None
    if base == 'OneCycle' and by_epoch:
        report.lossy(key, "lr_config.policy='OneCycle'", 'OneCycleLR by epoch: mmcv only '
                     'supports OneCycle by iteration')
        by_epoch = False
    policy = builder(s, end, run_end, report, key, name)
    if policy is not None:
        policy['by_epoch'] = by_epoch
    return policy


def _by_epoch_in_iteration_loop(s: dict, length: int, report: ConversionReport,
                                key: str) -> None:
    """A by-epoch scheduler under ``IterBasedTrainLoop``, which ends no epoch: mmengine
    never steps it, unless ``convert_to_iter_based``, and then by default (no ``end``) only
    for the loop's ``max_epochs`` = 1 epoch, one loader length of iterations."""
    if not s.get('convert_to_iter_based'):
        report.lossy(key, 'lr_config', 'by epoch in an IterBasedTrainLoop, which ends no '
                     "epoch: mmengine never steps it; mmcv's by-epoch policy under "
                     "IterBasedRunner follows the loader's passes")
    elif 'end' not in s:
        epochs = mmengine_scheduler_end(True, None, length)
        report.lossy(key, 'lr_config', f"no end: mmengine's Runner ends a by-epoch scheduler "
                     f'at max_epochs, {epochs} in an IterBasedTrainLoop, which '
                     'convert_to_iter_based turns into one loader length of iterations (not '
                     'stated in the config); mmcv policies act until the end')


def _ends_at_run_end(end, run_end, report, key, offset=0) -> None:
    if end is not None and end < _INF_LIKE and (run_end is None or end < run_end + offset):
        report.lossy(key, 'lr_config', f'end={end} stops before the run ends '
                     f'({run_end}); mmcv policies act until the end')


def _step(s, end, run_end, report, key, name):
    _ends_at_run_end(end, run_end, report, key)
    report.exact(key, "policy='step'")
    step = s.pop('step_size') if 'step_size' in s else list(s.pop('milestones'))
    return dict(policy='step', step=step, gamma=s.pop('gamma', 0.1))


def _exp(s, end, run_end, report, key, name):
    _ends_at_run_end(end, run_end, report, key)
    report.exact(key, "policy='exp'")
    return dict(policy='exp', gamma=s.pop('gamma'))


def _floor(s: dict, name: str) -> Dict[str, Any]:
    if s.get('eta_min_ratio') is not None:
        return {f'min_{name}_ratio': s['eta_min_ratio']}
    return {f'min_{name}': s.get('eta_min', 0.)}


def _cosine(s, end, run_end, report, key, name):
    t_max = s.get('T_max', end)
    if run_end is not None and t_max is not None and t_max != run_end:
        report.lossy(key, 'lr_config', f'T_max={t_max} differs from the run length '
                     f'{run_end}; mmcv anneals over the whole run')
    else:
        report.exact(key, "policy='CosineAnnealing'")
    return dict(policy='CosineAnnealing', **_floor(s, name))


def _flat_cosine(s, begin, end, run_end, by_epoch, report, key) -> dict:
    """A cosine from ``begin`` to the run's end: mmcv's FlatCosineAnnealing, whose
    ``round(start_percent * max)`` is ``begin`` for ``start_percent = begin / max``."""
    if (end not in (None, run_end) and end < _INF_LIKE) or s.get('T_max', run_end - begin) != \
            run_end - begin:
        report.lossy(key, "policy='FlatCosineAnnealing'", f'begin={begin}: mmcv\'s flat-cosine '
                     'anneals from begin to the run end (T_max = run length - begin)')
    else:
        report.exact(key, "policy='FlatCosineAnnealing' (start_percent = begin / run length)")
    return dict(policy='FlatCosineAnnealing', start_percent=begin / run_end, **_floor(s, 'lr'),
                by_epoch=by_epoch)


def _poly(s, end, run_end, report, key, name):
    if run_end is None or end is None or end - 1 != run_end:
        report.lossy(key, "lr_config.policy='poly'", f'PolyLR(end={end}) reaches eta_min at '
                     f'step {None if end is None else end - 1}; mmcv\'s poly reaches min_lr at '
                     f'the run length {run_end} (exact when end = run length + 1)')
    else:
        report.exact(key, "policy='poly'")
    return dict(policy='poly', power=s.get('power', 1.), min_lr=s.get('eta_min', 0.))


def _linear(s, end, run_end, report, key, name):
    if s.get('start_factor', 1 / 3) != 1.0 or run_end is None or end is None or \
            end - 1 != run_end:
        report.lossy(key, "policy='LinearAnnealing'", 'LinearAnnealing starts at the base '
                     'value and ends at the run length: exact for start_factor=1 and '
                     'end = run length + 1')
    else:
        report.exact(key, "policy='LinearAnnealing'")
    return dict(policy='LinearAnnealing', **{f'min_{name}_ratio': s.get('end_factor', 1.)})


def _restart(s, end, run_end, report, key, name):
    weights = list(s.get('restart_weights', [1]))
    floor = _floor(s, name)
    if any(w != 1 for w in weights) and any(floor.values()):
        # mmengine anneals base * w' → min; mmcv min + w (base - min): w = (w' - r) / (1 - r).
        ratio = floor.get(f'min_{name}_ratio')
        if ratio is None and name == 'lr' and s.get('_base_lr'):
            ratio = floor['min_lr'] / s['_base_lr']
        if ratio is None or ratio == 1:
            report.lossy(key, "policy='CosineRestart'", 'restart weights with an absolute '
                         'eta_min and param groups of different base lr: no one list of mmcv '
                         'weights reproduces mmengine for every group')
        else:
            weights = [(w - ratio) / (1 - ratio) for w in weights]
            report.exact(key, "policy='CosineRestart' (restart_weights = (w - r) / (1 - r), "
                         'r = min / base)')
    else:
        report.exact(key, "policy='CosineRestart'")
    return dict(policy='CosineRestart', periods=list(s['periods']),
                restart_weights=list(weights), **_floor(s, name))


def _one_cycle(s, end, run_end, report, key, name):
    total = s.get('total_steps', None if end is None else end - s.get('begin', 0))
    report.exact(key, "policy='OneCycle'")
    args = {k: s[k] for k in ('pct_start', 'anneal_strategy', 'div_factor', 'final_div_factor',
                              'three_phase') if k in s}
    if total is not None and total != run_end:
        args['total_steps'] = total
    return dict(policy='OneCycle', max_lr=s['eta_max'], **args)  # per_parameter_lists' list


_BUILDERS = {'Step': _step, 'MultiStep': _step, 'Exponential': _exp,
             'CosineAnnealing': _cosine, 'Poly': _poly, 'Linear': _linear,
             'CosineRestart': _restart, 'OneCycle': _one_cycle}
