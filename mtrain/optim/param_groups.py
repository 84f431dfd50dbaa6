"""Parameter groups from ``paramwise_cfg``: a pure function of (model, lr, weight decay, cfg).

The rules are mmcv 1.7.2's ``DefaultOptimizerConstructor.add_params``, decision
for decision, so an mmcv 1.x config trains with the same per-parameter learning
rates and weight decays. mmcv gives every parameter its own group; mtrain then
merges the groups with equal settings (:mod:`.merged_groups`), one group per
distinct (lr, weight_decay), each carrying both values. In mmcv's groups
(``merge=False``) a group carries ``lr`` / ``weight_decay`` only where a rule
derived one from the base value::

    groups = get_param_groups(model, 0.01, 1e-4, dict(norm_decay_mult=0.))  # merged
    rows = explain_param_groups(model, 0.01, 1e-4, dict(norm_decay_mult=0.))
    # rows[i] == {'name': 'bn.weight', 'shape': (8,), 'rule': 'norm', 'lr': 0.01,
    #             'weight_decay': 0.0, 'in_optimizer': True, 'duplicate_of': None}
"""

import logging
import numbers
from typing import Any, Dict, List, NamedTuple, Optional

import torch
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.instancenorm import _InstanceNorm

from ..utils.errors import ConfigError, did_you_mean
from .merged_groups import merge_param_groups

logger = logging.getLogger(__name__)

CFG_KEY = 'optimizer.paramwise_cfg'
MULT_KEYS = ('bias_lr_mult', 'bias_decay_mult', 'norm_decay_mult', 'dwconv_decay_mult',
             'dcn_offset_lr_mult')
DECAY_MULT_KEYS = ('bias_decay_mult', 'norm_decay_mult', 'dwconv_decay_mult')
PARAMWISE_KEYS = ('custom_keys', 'bypass_duplicate') + MULT_KEYS
CUSTOM_KEY_FIELDS = ('lr_mult', 'decay_mult')
NORM_TYPES = (_BatchNorm, _InstanceNorm, nn.GroupNorm, nn.LayerNorm)


class ParamGroupPlan(NamedTuple):
    """What :func:`plan_param_groups` decided.

    Attributes:
        groups: the optimizer's param groups: one per distinct setting, in the
            order mmcv first meets each (a module's own parameters, then its
            children's, depth first).
        rows: one dict per parameter visit (see :func:`explain_param_groups`).
        unused_custom_keys: ``custom_keys`` entries that decided no parameter.
        per_param_groups: mmcv's groups, one per parameter, in that order.
        position: for each of ``per_param_groups``, its parameter's index in
            the merged optimizer's flat parameter list.
    """

    groups: List[Dict[str, Any]]
    rows: List[Dict[str, Any]]
    unused_custom_keys: List[str]
    per_param_groups: List[Dict[str, Any]]
    position: List[int]


def is_norm(module: nn.Module) -> bool:
    """Whether ``norm_decay_mult`` applies: BatchNorm, InstanceNorm, GroupNorm, LayerNorm."""
    return isinstance(module, NORM_TYPES)


def is_depthwise_conv(module: nn.Module) -> bool:
    """mmcv's test for ``dwconv_decay_mult``: a ``Conv2d`` with ``groups == in_channels``.

    As in mmcv, ``out_channels`` is not checked, so a plain ``Conv2d(1, n, k)``
    (one input channel, one group) counts as depthwise too.
    """
    return isinstance(module, nn.Conv2d) and module.in_channels == module.groups


DCN_CLASS_NAMES = ('DeformConv2d', 'ModulatedDeformConv2d')


def is_dcn_module(module: nn.Module) -> bool:
    """Whether ``module`` is a deformable convolution, whose ``conv_offset`` child
    ``dcn_offset_lr_mult`` scales.

    mmcv checks ``isinstance(module, (mmcv.ops.DeformConv2d, ModulatedDeformConv2d))``,
    which also holds for their ``*Pack`` subclasses (the ones with a
    ``conv_offset`` child). mtrain cannot import mmcv.ops, so it asks the same
    of the class names: a class in the module's MRO is named ``DeformConv2d``
    or ``ModulatedDeformConv2d``. A module that merely has a ``conv_offset``
    child (mmdet's ``FeatureAdaption``) is not a DCN, as in mmcv.
    """
    return any(cls.__name__ in DCN_CLASS_NAMES for cls in type(module).__mro__)


def validate_paramwise_cfg(paramwise_cfg: Optional[Dict[str, Any]],
                           base_lr: Any = None, base_wd: Any = None) -> Dict[str, Any]:
    """Check ``paramwise_cfg`` and the base values, return it as a plain dict.

    Args:
        paramwise_cfg: the ``optimizer.paramwise_cfg`` dict, or None.
        base_lr: ``optimizer.lr`` (None when the config does not set it).
        base_wd: ``optimizer.weight_decay`` (None when the config does not set it).

    Raises:
        ConfigError: an unknown key (naming the closest known one), a multiplier
            that is not a non-negative number, a negative base value, or a decay
            multiplier without ``optimizer.weight_decay``.
    """
    _check_number(base_lr, 'optimizer.lr', optional=True)
    _check_number(base_wd, 'optimizer.weight_decay', optional=True)
    if paramwise_cfg is None:
        return {}
    if not isinstance(paramwise_cfg, dict):
        raise ConfigError(f'paramwise_cfg must be a dict or None, got '
                          f'{type(paramwise_cfg).__name__}: {paramwise_cfg!r}.', key=CFG_KEY)
    for name, value in paramwise_cfg.items():
        if name not in PARAMWISE_KEYS:
            raise ConfigError(f"'{name}' is not a paramwise_cfg option."
                              f'{did_you_mean(name, PARAMWISE_KEYS)} Known options: '
                              f'{", ".join(PARAMWISE_KEYS)}.', key=f'{CFG_KEY}.{name}')
        if name in MULT_KEYS:
            _check_number(value, f'{CFG_KEY}.{name}')
    if not isinstance(paramwise_cfg.get('bypass_duplicate', False), bool):
        raise ConfigError('bypass_duplicate must be True or False, got '
                          f"{paramwise_cfg['bypass_duplicate']!r}.",
                          key=f'{CFG_KEY}.bypass_duplicate')
    _check_custom_keys(paramwise_cfg.get('custom_keys', {}))
    if base_wd is None:
        _check_decay_needs_base_wd(paramwise_cfg)
    return dict(paramwise_cfg)


def _check_number(value: Any, key: str, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError(f'expected a number, got {type(value).__name__}: {value!r}.', key=key)
    if value < 0:
        raise ConfigError(f'expected a value >= 0, got {value}. Learning rates, weight decays '
                          'and their multipliers cannot be negative.', key=key)


def _check_custom_keys(custom_keys: Any) -> None:
    key = f'{CFG_KEY}.custom_keys'
    if not isinstance(custom_keys, dict):
        raise ConfigError('custom_keys must be a dict mapping a name substring to '
                          f"dict(lr_mult=..., decay_mult=...), got {custom_keys!r}.", key=key)
    for pattern, mults in custom_keys.items():
        if not isinstance(pattern, str) or not isinstance(mults, dict):
            raise ConfigError(f'each custom_keys entry must map a string to a dict such as '
                              f"dict(lr_mult=0.1), got {pattern!r}: {mults!r}.", key=key)
        for field, value in mults.items():
            if field not in CUSTOM_KEY_FIELDS:
                raise ConfigError(f"'{field}' is not a custom_keys field."
                                  f'{did_you_mean(field, CUSTOM_KEY_FIELDS)} Known fields: '
                                  'lr_mult, decay_mult.', key=f'{key}.{pattern}.{field}')
            _check_number(value, f'{key}.{pattern}.{field}')


def _check_decay_needs_base_wd(paramwise_cfg: Dict[str, Any]) -> None:
    """mmcv's ``base_wd should not be None`` assertion, as a sentence."""
    names = [f'{CFG_KEY}.{k}' for k in DECAY_MULT_KEYS if k in paramwise_cfg]
    names += [f'{CFG_KEY}.custom_keys.{pattern}.decay_mult'
              for pattern, mults in paramwise_cfg.get('custom_keys', {}).items()
              if 'decay_mult' in mults]
    if names:
        raise ConfigError(f'{names[0]} scales the weight decay, but optimizer.weight_decay is '
                          'not set. Set optimizer.weight_decay (e.g. 1e-4), or remove the '
                          'decay multiplier.', key=names[0])


def plan_param_groups(model: nn.Module, base_lr: Optional[float], base_wd: Optional[float],
                      paramwise_cfg: Optional[Dict[str, Any]]) -> ParamGroupPlan:
    """Decide every parameter's group, and why.

    Args:
        model: the (unwrapped) model; parameter names are relative to it.
        base_lr: ``optimizer.lr``; needed whenever a rule sets a group's ``lr``.
        base_wd: ``optimizer.weight_decay``, or None (then no group gets one).
        paramwise_cfg: the options (see ``docs/optimizer.md``); None or ``{}``
            still applies mmcv's rules with every multiplier at 1.

    Returns:
        The merged groups, one row per parameter visit, the custom keys that
        decided no parameter (each also logged as a warning, as a config
        shared by models that differ may hold keys for the others), and
        mmcv's per-parameter groups.
    """
    cfg = validate_paramwise_cfg(paramwise_cfg, base_lr, base_wd)
    planner = _Planner(base_lr, base_wd, cfg)
    planner.visit(model)
    unused = [k for k in cfg.get('custom_keys', {}) if k not in planner.used_keys]
    for pattern in unused:
        logger.warning(unused_key_message(pattern, planner.names))
    merged, position = merge_param_groups(planner.groups,
                                          dict(lr=base_lr, weight_decay=base_wd))
    return ParamGroupPlan(merged, planner.rows, unused, planner.groups, position)


def unused_key_message(pattern: str, names: List[str]) -> str:
    """Why ``custom_keys[pattern]`` decided no parameter, and the closest name piece."""
    if any(pattern in '.' + name for name in names):
        why = 'every parameter name containing it also contains a longer key, which wins'
    else:
        why = 'no parameter name contains it'
    return (f"{CFG_KEY}.custom_keys['{pattern}'] decided no parameter: {why}."
            f'{did_you_mean(pattern, _name_pieces(names))} Check the spelling against the '
            'parameter names (tools/explain_optimizer.py lists them).')


def _name_pieces(names: List[str]) -> set:
    """Every dotted prefix and every component of ``names``: what a custom key may be."""
    pieces = set()
    for name in names:
        parts = name.split('.')
        pieces.update(parts)
        pieces.update('.'.join(parts[:i]) for i in range(1, len(parts) + 1))
    return pieces


def get_param_groups(model: nn.Module, base_lr: Optional[float], base_wd: Optional[float],
                     paramwise_cfg: Optional[Dict[str, Any]],
                     merge: bool = True) -> List[Dict[str, Any]]:
    """The param groups for ``paramwise_cfg``: one per distinct setting.

    Each group is ``{'params': [...]}`` plus ``lr`` and/or ``weight_decay`` where
    a rule derived them (see :func:`plan_param_groups` for the arguments).
    ``merge=False`` gives mmcv 1.7.2's ``add_params`` groups, one per parameter,
    with the same per-parameter values.
    """
    plan = plan_param_groups(model, base_lr, base_wd, paramwise_cfg)
    return plan.groups if merge else plan.per_param_groups


def explain_param_groups(model: nn.Module, base_lr: Optional[float], base_wd: Optional[float],
                         paramwise_cfg: Optional[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """One row per parameter visit: which rule decided it and what it got.

    Row keys: ``name``; ``shape``; ``rule`` (``'custom_keys:<key>'``, ``'frozen'``,
    ``'duplicate'``, or ``'bias'``, ``'norm'``, ``'dwconv'``, ``'dcn_offset'``
    joined by ``+`` when two apply, else ``'default'``); ``lr`` and
    ``weight_decay`` (effective values, the base where no rule set one; None for
    a skipped duplicate or an unset base); ``in_optimizer``; ``duplicate_of``
    (the first name of a parameter seen before, else None).
    """
    return plan_param_groups(model, base_lr, base_wd, paramwise_cfg).rows


class _Planner:
    """Walks the module tree in mmcv's order, collecting groups and rows."""

    def __init__(self, base_lr: Optional[float], base_wd: Optional[float],
                 cfg: Dict[str, Any]) -> None:
        self.base_lr = base_lr
        self.base_wd = base_wd
        self.mults = {k: cfg.get(k, 1.) for k in MULT_KEYS}
        self.custom_keys = cfg.get('custom_keys', {})
        # Longest key first; keys of equal length in alphabetical order (mmcv's sort).
        self.sorted_keys = sorted(self.custom_keys, key=lambda k: (-len(k), k))
        self.bypass_duplicate = cfg.get('bypass_duplicate', False)
        self.groups: List[Dict[str, Any]] = []
        self.rows: List[Dict[str, Any]] = []
        self.used_keys: set = set()
        self.names: List[str] = []
        self._first_name: Dict[int, str] = {}

    def visit(self, module: nn.Module, prefix: str = '', parent_is_dcn: bool = False) -> None:
        """Add ``module``'s own parameters, then recurse into its children."""
        for name, param in module.named_parameters(recurse=False):
            self._add(module, prefix, name, param, parent_is_dcn)
        this_is_dcn = is_dcn_module(module)
        for child_name, child in module.named_children():
            # mmcv passes only "my parent is a DCN" down, one level.
            self.visit(child, f'{prefix}.{child_name}' if prefix else child_name, this_is_dcn)

    def _add(self, module: nn.Module, prefix: str, name: str, param: nn.Parameter,
             parent_is_dcn: bool) -> None:
        full_name = f'{prefix}.{name}' if prefix else name
        self.names.append(full_name)
        first = self._first_name.setdefault(id(param), full_name)
        duplicate_of = first if first != full_name else None
        if duplicate_of is not None and self.bypass_duplicate:
            logger.warning(f"'{full_name}' is the same parameter as '{first}'; it is left out "
                           'of the optimizer because bypass_duplicate=True.')
            self._row(full_name, param, None, 'duplicate', duplicate_of)
            return
        group: Dict[str, Any] = {'params': [param]}
        if not param.requires_grad:
            rule = 'frozen'  # kept with the base settings, as mmcv does
        else:
            # mmcv matches against f'{prefix}.{name}': a top-level 'w' is '.w' here.
            rule = (self._apply_custom_key(group, f'{prefix}.{name}', full_name)
                    or self._apply_rules(group, module, prefix, name, parent_is_dcn))
        self.groups.append(group)
        self._row(full_name, param, group, rule, duplicate_of)

    def _apply_custom_key(self, group: Dict[str, Any], match_name: str,
                          full_name: str) -> Optional[str]:
        """The first (longest) matching key sets lr and decay; no other rule applies."""
        for pattern in self.sorted_keys:
            if pattern in match_name:
                mults = self.custom_keys[pattern]
                group['lr'] = self._lr(mults.get('lr_mult', 1.), full_name)
                if self.base_wd is not None:
                    group['weight_decay'] = self.base_wd * mults.get('decay_mult', 1.)
                self.used_keys.add(pattern)
                return f'custom_keys:{pattern}'
        return None

    def _apply_rules(self, group: Dict[str, Any], module: nn.Module, prefix: str, name: str,
                     parent_is_dcn: bool) -> str:
        """bias / dcn_offset for the lr, then norm / dwconv / bias for the decay."""
        full_name = f'{prefix}.{name}' if prefix else name
        norm, is_bias = is_norm(module), name == 'bias'
        rules = []
        if is_bias and not (norm or parent_is_dcn):
            group['lr'] = self._lr(self.mults['bias_lr_mult'], full_name)
            rules.append('bias')
        if parent_is_dcn and 'conv_offset' in prefix and isinstance(module, nn.Conv2d):
            group['lr'] = self._lr(self.mults['dcn_offset_lr_mult'], full_name)
            rules.append('dcn_offset')
        if self.base_wd is not None:
            if norm:
                group['weight_decay'] = self.base_wd * self.mults['norm_decay_mult']
                rules.append('norm')
            elif is_depthwise_conv(module):
                group['weight_decay'] = self.base_wd * self.mults['dwconv_decay_mult']
                rules.append('dwconv')
            elif is_bias and not parent_is_dcn:
                group['weight_decay'] = self.base_wd * self.mults['bias_decay_mult']
                rules.append('bias')
        return '+'.join(dict.fromkeys(rules)) or 'default'

    def _lr(self, mult: float, full_name: str) -> float:
        if self.base_lr is None:
            raise ConfigError(f"paramwise_cfg sets a learning rate for '{full_name}' as a "
                              'multiple of optimizer.lr, but optimizer.lr is not set. Set '
                              'optimizer.lr explicitly.', key='optimizer.lr')
        return self.base_lr * mult

    def _row(self, name: str, param: nn.Parameter, group: Optional[Dict[str, Any]], rule: str,
             duplicate_of: Optional[str]) -> None:
        self.rows.append({
            'name': name, 'shape': tuple(param.shape), 'rule': rule,
            'lr': None if group is None else group.get('lr', self.base_lr),
            'weight_decay': None if group is None else group.get('weight_decay', self.base_wd),
            'in_optimizer': group is not None, 'duplicate_of': duplicate_of})
