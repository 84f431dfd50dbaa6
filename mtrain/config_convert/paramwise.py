"""Where mmcv 1.7.2's and mmengine 0.10's ``paramwise_cfg`` rules give a parameter other values.

Both constructors walk the model alike; they differ in the order of the
weight-decay rules and in what an unset multiplier means (mmcv: 1, applied;
mmengine: not applied). For a given ``paramwise_cfg`` the two agree on every
model unless one of the cases below holds; each case is checked numerically
against both frameworks' constructors in ``tests/config_convert``.
"""

from typing import Any, Dict, List, Optional

#: ``custom_keys`` fields both frameworks read; mmengine copies any other into the group.
_CUSTOM_FIELDS = ('lr_mult', 'decay_mult')


def mmengine_differs(paramwise_cfg: Dict[str, Any]) -> List[str]:
    """Why mmengine's rules give some parameter other values than mmcv's ([]: they agree).

    ``paramwise_cfg`` is read as an mmengine config would be; the reasons name
    the keys and the parameters that differ.
    """
    cfg = dict(paramwise_cfg or {})
    reasons = []
    flat = cfg.get('flat_decay_mult')
    if flat is not None and flat != 1:
        reasons.append(f'flat_decay_mult={flat} (mmengine only) scales the weight decay of '
                       '1-d parameters no other rule decides; mmcv has no such rule')
    bias = cfg.get('bias_decay_mult')
    if bias is not None and bias != 1 and 'norm_decay_mult' not in cfg:
        reasons.append(f'bias_decay_mult={bias} reaches norm-layer biases in mmengine when '
                       'norm_decay_mult is unset; mmcv gives them norm_decay_mult (1)')
    if bias is not None and bias != cfg.get('dwconv_decay_mult', 1):
        reasons.append(f'bias_decay_mult={bias} decides depth-wise conv biases in mmengine '
                       '(its bias rule comes first); mmcv gives them dwconv_decay_mult '
                       f"({cfg.get('dwconv_decay_mult', 1)})")
    for pattern, fields in (cfg.get('custom_keys') or {}).items():
        extra = sorted(set(fields) - set(_CUSTOM_FIELDS))
        if extra:
            reasons.append(f"custom_keys['{pattern}'] sets {extra}: mmengine copies them "
                           'into the param group, mmcv reads only lr_mult and decay_mult')
    return reasons


def as_mmengine(paramwise_cfg: Dict[str, Any]) -> Dict[str, Any]:
    """An mmcv ``paramwise_cfg`` written so mmengine's rules give mmcv's values where they can.

    ``norm_decay_mult`` is written out (1) beside a ``bias_decay_mult``, so
    norm biases keep mmcv's decay; the depth-wise case cannot be written
    (:func:`mmengine_differs` still reports it).
    """
    cfg = dict(paramwise_cfg)
    if cfg.get('bias_decay_mult', 1) != 1 and 'norm_decay_mult' not in cfg:
        cfg['norm_decay_mult'] = 1.
    return cfg


def uniform_base_lr(optimizer_cfg: Any) -> Optional[float]:
    """``optimizer.lr`` when every parameter starts from it (no lr multiplier), else None."""
    if not isinstance(optimizer_cfg, dict) or not optimizer_cfg.get('lr'):
        return None
    paramwise = dict(optimizer_cfg.get('paramwise_cfg') or {})
    mults = [paramwise.get(k, 1) for k in ('bias_lr_mult', 'dcn_offset_lr_mult')]
    mults += [v.get('lr_mult', 1) for v in (paramwise.get('custom_keys') or {}).values()]
    return optimizer_cfg['lr'] if all(m == 1 for m in mults) else None
