"""mmcv 1.x ``lr_config``/``momentum_config`` → mmengine ``param_scheduler`` entries.

Exactness rests on how the two frameworks compute a value:

* mmcv computes each lr in closed form from the epoch or iteration, and
  multiplies the warmup factor onto that *regular* lr;
* mmengine's schedulers are chained: each step multiplies (or, for
  cosine/poly with a floor, shifts) the group's current value.

Products commute, so warmup × step/multistep/exp/cosine/poly chains match
mmcv to rounding. A floor (``min_lr``) under a warmup does not commute, and
closed-form schedulers (OneCycle, a restart's first step) overwrite the warmup:
those are reported lossy. mmengine's ``LinearLR``/``ConstantLR``/``PolyLR``
reach their end value at step ``end - 1``; mmcv at ``warmup_iters`` or
``max``, hence the ``+ 1`` below.

Example::

    lr_config = dict(policy='step', step=[8, 11], warmup='linear', warmup_iters=500,
                     warmup_ratio=0.001)
    # → [dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=501),
    #    dict(type='MultiStepLR', milestones=[8, 11], gamma=0.1, by_epoch=True, begin=0, end=12)]
"""

from typing import Any, Dict, List, Optional, Tuple

from .report import ConversionReport
from .schedule_cycles import cyclic, one_cycle_momentum
from .table import NO_COUNTERPART

#: ``(by_epoch runner?, max_epochs or max_iters)``
Loop = Tuple[bool, int]


def policy_name(policy: str) -> str:
    """mmcv's normalisation: a lower-case policy is title-cased (``'step'`` → ``'Step'``)."""
    return policy.title() if policy == policy.lower() else policy


def lr_schedulers(lr_config: Dict[str, Any], loop: Loop, report: ConversionReport,
                  base_lr: Optional[float] = None) -> List[dict]:
    """The LR schedulers for ``lr_config`` (warmup first), each decision in ``report``.

    ``base_lr``: the one base lr of every param group, when there is one
    (:func:`~.paramwise.uniform_base_lr`); some translations depend on it.
    """
    cfg = dict(lr_config, _base_lr=base_lr)
    policy = policy_name(cfg.pop('policy', 'Fixed'))
    by_epoch = cfg.pop('by_epoch', policy != 'OneCycle')
    warmup = _warmup(cfg, report)
    main = _lr_main(policy, cfg, by_epoch, loop, report)
    _check_warmup_commutes(warmup, policy, cfg, 'lr', report)
    return warmup + main


def _warmup(cfg: Dict[str, Any], report: ConversionReport, kind: str = 'LR',
            default_ratio: float = 0.1) -> List[dict]:
    """The warmup schedulers; ``kind='Momentum'`` for mtrain's momentum warmup, which
    multiplies the momentum by the same factor an LR warmup would (mmcv 1.7.2 divides by
    it; docs/migration.md), so the same schedulers carry it."""
    section = 'lr_config' if kind == 'LR' else 'momentum_config'
    warmup = cfg.pop('warmup', None)
    iters = cfg.pop('warmup_iters', 0)
    ratio = cfg.pop('warmup_ratio', default_ratio)
    if warmup is None:
        cfg.pop('warmup_by_epoch', None)
        return []
    if kind == 'Momentum':
        report.note(f'{section}.warmup', 'param_scheduler', "mtrain's momentum warmup "
                    'multiplies by the warmup factor (mmcv 1.7.2 divides, docs/migration.md); '
                    "the schedulers below give mtrain's numbers")
    if cfg.pop('warmup_by_epoch', False):
        return _warmup_by_epoch(warmup, iters, ratio, kind, section, report)
    if warmup == 'exp':
        # mmcv: ratio ** (1 - t / W) = ratio * gamma ** t with gamma = ratio ** (-1 / W):
        # a LinearLR acting at step 0 only (× ratio, kept), then × gamma for steps 1..W.
        report.exact(f"{section}.warmup='exp'", f'param_scheduler: Linear{kind}(end=1) '
                     f'× Exponential{kind}(gamma=warmup_ratio ** (-1 / warmup_iters))')
        return [dict(type=f'Linear{kind}', start_factor=ratio, end_factor=ratio,
                     by_epoch=False, begin=0, end=1),
                dict(type=f'Exponential{kind}', gamma=ratio ** (-1 / iters), by_epoch=False,
                     begin=0, end=iters + 1)]
    report.exact(f"{section}.warmup='{warmup}'", f'param_scheduler: '
                 f"{'Linear' if warmup == 'linear' else 'Constant'}{kind}")
    if warmup == 'linear':
        return [dict(type=f'Linear{kind}', start_factor=ratio, by_epoch=False, begin=0,
                     end=iters + 1)]
    return [dict(type=f'Constant{kind}', factor=ratio, by_epoch=False, begin=0,
                 end=iters + 1)]


def _warmup_by_epoch(warmup: str, epochs: int, ratio: float, kind: str, section: str,
                     report: ConversionReport) -> List[dict]:
    """A warmup over ``epochs`` epochs: exact for 'constant' (a factor per epoch); 'linear'
    and 'exp' change every iteration over ``epochs * epoch_length``, which the config does
    not state (``convert_to_iter_based`` gives LinearLR one iteration fewer)."""
    key = f'{section}.warmup_by_epoch'
    if warmup == 'constant':
        report.exact(key, f'Constant{kind}(by_epoch=True, end=warmup_iters + 1)')
        return [dict(type=f'Constant{kind}', factor=ratio, by_epoch=True, begin=0,
                     end=epochs + 1)]
    report.lossy(key, 'param_scheduler', NO_COUNTERPART[f"warmup_by_epoch ('{warmup}')"])
    if warmup != 'linear':
        return []
    return [dict(type=f'Linear{kind}', start_factor=ratio, by_epoch=True, begin=0, end=epochs,
                 convert_to_iter_based=True)]


def _span(by_epoch: bool, loop: Loop, report: ConversionReport, key: str,
          extra: int = 0) -> Optional[Dict[str, Any]]:
    """``begin``/``end`` for a schedule over the whole run (``None``: cannot be expressed)."""
    loop_by_epoch, length = loop
    if by_epoch and not loop_by_epoch:
        report.lossy(key, 'param_scheduler', 'a by-epoch policy under IterBasedRunner: mmcv '
                     'sets it once per IterLoader epoch, mmengine never steps it')
        return None
    if by_epoch == loop_by_epoch:
        return dict(by_epoch=by_epoch, begin=0, end=length + extra)
    # By iteration inside an epoch loop: mmengine's Runner fills in end = max_iters. A
    # scheduler reaching its end value at end - begin - 1 gets the one step more from
    # begin=-1: it still starts at step 0 (its own count starts with the run's), and
    # end - begin - 1 = max_iters, as mmcv's closed form.
    return dict(by_epoch=False, begin=-extra)


def _lr_main(policy: str, cfg: Dict[str, Any], by_epoch: bool, loop: Loop,
             report: ConversionReport) -> List[dict]:
    key = f"lr_config.policy='{policy}'"
    builder = _LR_BUILDERS.get(policy)
    if builder is None:
        report.lossy(key, '(dropped)', NO_COUNTERPART.get(
            policy, f"'{policy}' is not an mmcv 1.7.2 LR policy the converter knows"))
        return []
    return builder(cfg, by_epoch, loop, report, key)


def _fixed(cfg, by_epoch, loop, report, key):
    report.exact(key, '(no scheduler)')
    return []


def _step(cfg, by_epoch, loop, report, key, kind='LR', gamma_default=0.1):
    span = _span(by_epoch, loop, report, key)
    if span is None:
        return []
    step, gamma = cfg['step'], cfg.get('gamma', gamma_default)
    floor = cfg.get(f'min_{"lr" if kind == "LR" else "momentum"}')
    if floor is not None:
        base = cfg.get('_base_lr') if kind == 'LR' else None  # momentum: no one base known
        return _step_with_floor(step, gamma, floor, base, span, report, key, kind)
    report.exact(key, f'{"Step" if isinstance(step, int) else "MultiStep"}{kind}')
    if isinstance(step, int):
        return [dict(type=f'Step{kind}', step_size=step, gamma=gamma, **span)]
    return [dict(type=f'MultiStep{kind}', milestones=list(step), gamma=gamma, **span)]


def _step_with_floor(step, gamma, floor, base, span, report, key, kind):
    """mmcv: ``max(base * gamma ** k, min_lr)``. With one base lr for every group the floor
    is a milestone: MultiStepLR up to the last decay that stays above it, then one more
    step of ``gamma = min_lr / lr``, landing on it. Per-group base lrs reach an absolute
    floor at different milestones, which one scheduler cannot say."""
    nearest = dict(type=f'Step{kind}', step_size=step) if isinstance(step, int) else \
        dict(type=f'MultiStep{kind}', milestones=list(step))
    if isinstance(step, int):  # every `step`: the milestones within the run
        step = list(range(step, span['end'], step)) if 'end' in span else None
    if base is None or step is None or base < floor or gamma > 1:
        report.lossy(key + '.min', 'param_scheduler', f'Step{kind}/MultiStep{kind} have no '
                     'floor: exact only with one base lr for every param group and a known '
                     'run length (min_lr becomes a milestone)')
        return [dict(nearest, gamma=gamma, **span)]
    above = [m for i, m in enumerate(step) if base * gamma ** (i + 1) >= floor]
    report.exact(key, f'MultiStep{kind}, then MultiStep{kind}(gamma=min_lr / lr) at the '
                 'milestone where mmcv clamps to min_lr')
    out = [dict(type=f'MultiStep{kind}', milestones=above, gamma=gamma, **span)]
    if len(above) < len(step):
        landing = floor / (base * gamma ** len(above))
        out.append(dict(type=f'MultiStep{kind}', milestones=[step[len(above)]],
                        gamma=landing, **span))
    return out


def _exp(cfg, by_epoch, loop, report, key):
    span = _span(by_epoch, loop, report, key)
    if span is None:
        return []
    report.exact(key, 'ExponentialLR')
    return [dict(type='ExponentialLR', gamma=cfg['gamma'], **span)]


def _poly(cfg, by_epoch, loop, report, key):
    span = _span(by_epoch, loop, report, key, extra=1)
    if span is None:
        return []
    report.exact(key, 'PolyLR (end = max + 1, or begin=-1 when the Runner fills in end: '
                 'PolyLR reaches eta_min at end - begin - 1)')
    return [dict(type='PolyLR', power=cfg.get('power', 1.), eta_min=cfg.get('min_lr', 0.),
                 **span)]


def _floor(cfg: Dict[str, Any], name: str) -> Dict[str, Any]:
    if cfg.get(f'min_{name}_ratio') is not None:
        return dict(eta_min_ratio=cfg[f'min_{name}_ratio'])
    return dict(eta_min=cfg.get(f'min_{name}') or 0.)


def _cosine(cfg, by_epoch, loop, report, key, kind='LR', name='lr'):
    span = _span(by_epoch, loop, report, key)
    if span is None:
        return []
    report.exact(key, f'CosineAnnealing{kind}')
    t_max = dict(T_max=span['end']) if 'end' in span else {}
    return [dict(type=f'CosineAnnealing{kind}', **t_max, **_floor(cfg, name), **span)]


def _restart(cfg, by_epoch, loop, report, key):
    span = _span(by_epoch, loop, report, key)
    if span is None:
        return []
    weights = list(cfg.get('restart_weights', [1]))
    floor = _floor(cfg, 'lr')
    if any(w != 1 for w in weights) and any(floor.values()):
        # mmcv: min + w (base - min) cos-term; mmengine anneals base * w' → min, the same
        # when w' = r + w (1 - r), r = min / base: one list if r is one ratio for all groups.
        ratio = floor.get('eta_min_ratio')
        if ratio is None and cfg.get('_base_lr'):
            ratio = floor['eta_min'] / cfg['_base_lr']
        if ratio is None:
            report.lossy(key, 'CosineRestartLR', 'restart weights with an absolute min_lr and '
                         'param groups of different base lr: mmengine anneals from base * w '
                         'to min, mmcv scales (base - min) by w, and no one list of weights '
                         'makes them agree for every group')
        else:
            weights = [ratio + w * (1 - ratio) for w in weights]
            report.exact(key, 'CosineRestartLR (restart_weights = r + w (1 - r), '
                         'r = min / base)')
    else:
        report.exact(key, 'CosineRestartLR')
    return [dict(type='CosineRestartLR', periods=list(cfg['periods']),
                 restart_weights=weights, **floor, **span)]


def _one_cycle(cfg, by_epoch, loop, report, key):
    if by_epoch:
        report.lossy(key, '(dropped)', 'mmcv only supports OneCycle by iteration')
        return []
    if not isinstance(cfg['max_lr'], (int, float)):
        report.lossy(key + '.max_lr', 'OneCycleLR.eta_max', 'a per-group max_lr (list/dict)')
    report.note(key, 'OneCycleLR', "mmcv's OneCycle is by iteration, mmengine's OneCycleLR "
                'defaults to by_epoch=True: by_epoch=False is written out')
    args = {k: cfg[k] for k in ('total_steps', 'pct_start', 'anneal_strategy', 'div_factor',
                                'final_div_factor', 'three_phase') if k in cfg}
    span = _span(False, loop, report, key)
    if 'total_steps' not in args and 'end' in span:
        args['total_steps'] = span['end']
    return [dict(type='OneCycleLR', eta_max=cfg['max_lr'], **args, **span)]


def _linear(cfg, by_epoch, loop, report, key, kind='LR', name='lr'):
    span = _span(by_epoch, loop, report, key, extra=1)
    if span is None:
        return []
    ratio = cfg.get(f'min_{name}_ratio')
    if ratio is None and cfg.get(f'min_{name}'):  # an absolute floor: a factor of one base
        base = cfg.get('_base_lr') if kind == 'LR' else None
        if base is None:
            report.lossy(key, '(dropped)', f'Linear{kind} scales by a factor: an absolute '
                         f'min_{name} is one factor only when every param group has the same '
                         f'base {name}')
            return []
        ratio = cfg[f'min_{name}'] / base
    report.exact(key, f'Linear{kind} (end = max + 1, or begin=-1: it reaches end_factor at '
                 'end - begin - 1)')
    return [dict(type=f'Linear{kind}', start_factor=1.0, end_factor=ratio or 0., **span)]


def _flat_cosine(cfg, by_epoch, loop, report, key):
    """mmcv: base until round(start_percent * max), then cosine over the rest. mmengine's
    CosineAnnealingLR counts its own steps from ``begin``, so begin=start, T_max=max - start."""
    span = _span(by_epoch, loop, report, key)
    if span is None or 'end' not in span:
        report.lossy(key, '(dropped)', 'FlatCosineAnnealing by iteration under an epoch '
                     'runner: the cosine phase starts at a fraction of max_iters, which the '
                     'config does not state')
        return []
    start = round(span['end'] * cfg.get('start_percent', 0.75))
    report.exact(key, 'CosineAnnealingLR(begin=round(start_percent * max), T_max=max - begin)')
    return [dict(type='CosineAnnealingLR', T_max=span['end'] - start, **_floor(cfg, 'lr'),
                 by_epoch=span['by_epoch'], begin=start, end=span['end'])]


def _cyclic(cfg, by_epoch, loop, report, key):
    return cyclic(cfg, loop, report, key)


_LR_BUILDERS = {'Fixed': _fixed, 'Cyclic': _cyclic, 'FlatCosineAnnealing': _flat_cosine,
                'Step': _step, 'Exp': _exp, 'Poly': _poly,
                'CosineAnnealing': _cosine, 'CosineRestart': _restart, 'OneCycle': _one_cycle,
                'LinearAnnealing': _linear}


def _check_warmup_commutes(warmup: List[dict], policy: str, cfg: Dict[str, Any], name: str,
                           report: ConversionReport) -> None:
    """Report a warmup whose product with the policy does not commute in mmengine's chain."""
    floor = cfg.get(f'min_{name}') or cfg.get(f'min_{name}_ratio')
    if warmup and (policy in ('OneCycle', 'CosineRestart', 'Cyclic') or
                   (floor and policy in ('CosineAnnealing', 'Poly', 'FlatCosineAnnealing'))):
        section = 'lr_config' if name == 'lr' else 'momentum_config'
        report.lossy(f'{section}.warmup', 'param_scheduler',
                     f'a warmup under {policy}' + (' with a floor' if floor else '') +
                     f': mmengine chains schedulers by updating the current {name}, mmcv '
                     'multiplies the warmup factor onto the closed-form value; the two differ '
                     'while both act')


def momentum_schedulers(momentum_config: Dict[str, Any], loop: Loop, report: ConversionReport,
                        optimizer: Optional[Dict[str, Any]] = None) -> List[dict]:
    """The momentum schedulers for ``momentum_config`` (warmup first).

    ``optimizer``: the converted optimizer dict; OneCycle writes its start value there.
    """
    cfg = dict(momentum_config)
    policy = policy_name(cfg.pop('policy', 'Fixed'))
    by_epoch = cfg.pop('by_epoch', True)
    key = f"momentum_config.policy='{policy}'"
    warmup = _warmup(cfg, report, 'Momentum', default_ratio=0.9)
    _check_warmup_commutes(warmup, 'Cyclic' if policy == 'OneCycle' else policy, cfg,
                           'momentum', report)
    if policy == 'Step':
        return warmup + _step(cfg, by_epoch, loop, report, key, 'Momentum', gamma_default=0.5)
    if policy == 'CosineAnnealing':
        return warmup + _cosine(cfg, by_epoch, loop, report, key, 'Momentum', 'momentum')
    if policy == 'LinearAnnealing':
        return warmup + _linear(cfg, by_epoch, loop, report, key, 'Momentum', 'momentum')
    if policy == 'Cyclic':
        return warmup + cyclic(cfg, loop, report, key, 'Momentum', (0.85 / 0.95, 1.))
    if policy == 'OneCycle':
        return warmup + one_cycle_momentum(cfg, loop, report, key, optimizer)
    report.lossy(key, '(dropped)', NO_COUNTERPART.get(
        f'{policy} momentum', f"'{policy}' momentum has no mmengine scheduler"))
    return warmup
