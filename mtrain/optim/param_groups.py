"""What ``paramwise_cfg`` means, in each framework: module kinds, validation, the rules.

mmcv 1.7.2's ``DefaultOptimizerConstructor.add_params`` and mmengine 0.10's
``DefaultOptimWrapperConstructor.add_params`` walk the model the same way but
decide a parameter's lr and weight decay differently: mmcv applies every
multiplier (default 1) and gives the weight decay of a norm layer or a
depth-wise conv before the bias rule; mmengine applies only the multipliers a
config sets, the bias rule before the depth-wise one, has ``flat_decay_mult``
for every other 1-d parameter, leaves frozen parameters out, and copies a
custom key's other fields into the group. :func:`mmcv_rules` and
:func:`mmengine_rules` are those two decisions, one parameter at a time; the
constructors (:mod:`.constructor`) walk the model and call them::

    group = {'params': [param]}
    rule = mmcv_rules(group, ctx)      # e.g. 'norm', 'bias', 'custom_keys:head'
"""


import logging
import numbers
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

import torch
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.instancenorm import _InstanceNorm

from ..utils.errors import ConfigError, ConfigTypeError, did_you_mean

logger = logging.getLogger(__name__)

CFG_KEY = 'optimizer.paramwise_cfg'
MULT_KEYS = ('bias_lr_mult', 'bias_decay_mult', 'norm_decay_mult', 'dwconv_decay_mult',
             'dcn_offset_lr_mult')
#: mmengine 0.10 also reads ``flat_decay_mult``.
ENGINE_MULT_KEYS = MULT_KEYS + ('flat_decay_mult', )
DECAY_MULT_KEYS = ('bias_decay_mult', 'norm_decay_mult', 'dwconv_decay_mult')
#: ``merge_groups`` is mtrain's: False keeps mmcv's one param group per parameter.
PARAMWISE_KEYS = ('custom_keys', 'bypass_duplicate', 'merge_groups') + MULT_KEYS
ENGINE_PARAMWISE_KEYS = ('custom_keys', 'bypass_duplicate', 'merge_groups') + ENGINE_MULT_KEYS
CUSTOM_KEY_FIELDS = ('lr_mult', 'decay_mult')
NORM_TYPES = (_BatchNorm, _InstanceNorm, nn.GroupNorm, nn.LayerNorm)


class ParamGroupPlan(NamedTuple):
    """What a constructor decided (:meth:`DefaultOptimizerConstructor.plan`).

    Attributes:
        groups: the optimizer's param groups: ``per_param_groups`` with equal
            settings merged (or the same list when merging is off).
        rows: one dict per parameter visit (see :func:`explain_param_groups`).
        unused_custom_keys: ``custom_keys`` entries that decided no parameter.
        per_param_groups: what ``add_params`` built, in its order (mmcv's
            layout: one group per parameter, unless a subclass grouped them).
        position: for each parameter of ``per_param_groups`` in order, its index
            in the optimizer's flat parameter list.
    """

    groups: List[Dict[str, Any]]
    rows: List[Dict[str, Any]]
    unused_custom_keys: List[str]
    per_param_groups: List[Dict[str, Any]]
    position: List[int]


class ParamContext(NamedTuple):
    """One parameter as ``add_params`` meets it, and the constructor's settings."""

    module: nn.Module
    prefix: str
    name: str
    param: nn.Parameter
    is_dcn_module: Any
    base_lr: Optional[float]
    base_wd: Optional[float]
    cfg: Dict[str, Any]

    @property
    def full_name(self) -> str:
        return f'{self.prefix}.{self.name}' if self.prefix else self.name


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


def validate_paramwise_cfg(paramwise_cfg: Optional[Dict[str, Any]], base_lr: Any = None,
                           base_wd: Any = None, known: Optional[Sequence[str]] = PARAMWISE_KEYS,
                           custom_fields: Optional[Sequence[str]] = CUSTOM_KEY_FIELDS
                           ) -> Dict[str, Any]:
    """Check ``paramwise_cfg`` and the base values, return it as a plain dict.

    Args:
        paramwise_cfg: the ``optimizer.paramwise_cfg`` dict, or None.
        base_lr: ``optimizer.lr`` (None when the config does not set it).
        base_wd: ``optimizer.weight_decay`` (None when the config does not set it).
        known: the keys the constructor reads; None accepts any other key (a
            subclass's own options), still checking the values of the keys above.
        custom_fields: the fields a ``custom_keys`` entry may have; None: any
            (mmengine copies the others into the param group).

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
        raise ConfigTypeError(f'paramwise_cfg must be a dict or None, got '
                          f'{type(paramwise_cfg).__name__}: {paramwise_cfg!r}.', key=CFG_KEY)
    for name, value in paramwise_cfg.items():
        if known is not None and name not in known:
            raise ConfigError(f"'{name}' is not a paramwise_cfg option."
                              f'{did_you_mean(name, known)} Known options: '
                              f'{", ".join(known)}. A constructor of your own that reads '
                              'other options subclasses DefaultOptimizerConstructor and names '
                              'itself in optimizer.constructor.', key=f'{CFG_KEY}.{name}')
        if name in ENGINE_MULT_KEYS:
            _check_number(value, f'{CFG_KEY}.{name}')
    for flag in ('bypass_duplicate', 'merge_groups'):
        if not isinstance(paramwise_cfg.get(flag, False), bool):
            raise ConfigError(f'{flag} must be True or False, got {paramwise_cfg[flag]!r}.',
                              key=f'{CFG_KEY}.{flag}')
    _check_custom_keys(paramwise_cfg.get('custom_keys', {}), custom_fields)
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


def _check_custom_keys(custom_keys: Any, fields: Optional[Sequence[str]]) -> None:
    key = f'{CFG_KEY}.custom_keys'
    if not isinstance(custom_keys, dict):
        raise ConfigError('custom_keys must be a dict mapping a name substring to '
                          f"dict(lr_mult=..., decay_mult=...), got {custom_keys!r}.", key=key)
    for pattern, mults in custom_keys.items():
        if not isinstance(pattern, str) or not isinstance(mults, dict):
            raise ConfigError(f'each custom_keys entry must map a string to a dict such as '
                              f"dict(lr_mult=0.1), got {pattern!r}: {mults!r}.", key=key)
        for field, value in mults.items():
            if fields is not None and field not in fields:
                raise ConfigError(f"'{field}' is not a custom_keys field."
                                  f'{did_you_mean(field, fields)} Known fields: '
                                  'lr_mult, decay_mult.', key=f'{key}.{pattern}.{field}')
            if field in CUSTOM_KEY_FIELDS:
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


def sorted_custom_keys(custom_keys: Dict[str, Any]) -> List[str]:
    """Longest key first; keys of equal length in alphabetical order (both frameworks' sort)."""
    return sorted(custom_keys, key=lambda k: (-len(k), k))


def custom_key_rule(group: Dict[str, Any], ctx: ParamContext,
                    copy_fields: bool = False) -> Optional[str]:
    """The first (longest) custom key in ``prefix.name`` sets lr and decay; no other rule applies.

    ``copy_fields``: mmengine also copies the entry's fields (``lr_mult``,
    ``momentum``, ...) into the group.
    """
    custom_keys = ctx.cfg.get('custom_keys', {})
    for pattern in sorted_custom_keys(custom_keys):
        if pattern in f'{ctx.prefix}.{ctx.name}':  # a top-level 'w' is '.w' here, as in mmcv
            mults = custom_keys[pattern]
            group['lr'] = _lr(ctx, mults.get('lr_mult', 1.))
            if ctx.base_wd is not None:
                group['weight_decay'] = ctx.base_wd * mults.get('decay_mult', 1.)
            if copy_fields:
                group.update(mults)
            return f'custom_keys:{pattern}'
    return None


def mmcv_rules(group: Dict[str, Any], ctx: ParamContext) -> str:
    """mmcv 1.7.2: every multiplier (default 1); decay by norm, then depth-wise, then bias."""
    rule = custom_key_rule(group, ctx)
    if rule:
        return rule
    mult = {k: ctx.cfg.get(k, 1.) for k in MULT_KEYS}
    norm, is_bias, rules = is_norm(ctx.module), ctx.name == 'bias', []
    if is_bias and not (norm or ctx.is_dcn_module):
        group['lr'] = _lr(ctx, mult['bias_lr_mult'])
        rules.append('bias')
    if _is_dcn_offset(ctx):
        group['lr'] = _lr(ctx, mult['dcn_offset_lr_mult'])
        rules.append('dcn_offset')
    if ctx.base_wd is not None:
        if norm:
            group['weight_decay'] = ctx.base_wd * mult['norm_decay_mult']
            rules.append('norm')
        elif is_depthwise_conv(ctx.module):
            group['weight_decay'] = ctx.base_wd * mult['dwconv_decay_mult']
            rules.append('dwconv')
        elif is_bias and not ctx.is_dcn_module:
            group['weight_decay'] = ctx.base_wd * mult['bias_decay_mult']
            rules.append('bias')
    return '+'.join(dict.fromkeys(rules)) or 'default'


def mmengine_rules(group: Dict[str, Any], ctx: ParamContext) -> str:
    """mmengine 0.10: only the multipliers set; decay by norm, bias, depth-wise, then flat."""
    rule = custom_key_rule(group, ctx, copy_fields=True)
    if rule:
        return rule
    mult = {k: ctx.cfg.get(k) for k in ENGINE_MULT_KEYS}
    norm, is_bias, rules = is_norm(ctx.module), ctx.name == 'bias', []
    if is_bias and not (norm or ctx.is_dcn_module) and mult['bias_lr_mult'] is not None:
        group['lr'] = _lr(ctx, mult['bias_lr_mult'])
        rules.append('bias')
    if _is_dcn_offset(ctx) and mult['dcn_offset_lr_mult'] is not None:
        group['lr'] = _lr(ctx, mult['dcn_offset_lr_mult'])
        rules.append('dcn_offset')
    decay = None
    if ctx.base_wd is not None:
        if norm and mult['norm_decay_mult'] is not None:
            decay = 'norm'
        elif is_bias and not ctx.is_dcn_module and mult['bias_decay_mult'] is not None:
            decay = 'bias'
        elif is_depthwise_conv(ctx.module) and mult['dwconv_decay_mult'] is not None:
            decay = 'dwconv'
        elif ctx.param.ndim == 1 and not ctx.is_dcn_module and \
                mult['flat_decay_mult'] is not None:
            decay = 'flat'
    if decay is not None:
        group['weight_decay'] = ctx.base_wd * mult[f'{decay}_decay_mult']
        rules.append(decay)
    return '+'.join(dict.fromkeys(rules)) or 'default'


def _is_dcn_offset(ctx: ParamContext) -> bool:
    return bool(ctx.is_dcn_module) and 'conv_offset' in ctx.prefix and \
        isinstance(ctx.module, nn.Conv2d)


def _lr(ctx: ParamContext, mult: float) -> float:
    if ctx.base_lr is None:
        raise ConfigError(f"paramwise_cfg sets a learning rate for '{ctx.full_name}' as a "
                          'multiple of optimizer.lr, but optimizer.lr is not set. Set '
                          'optimizer.lr explicitly.', key='optimizer.lr')
    return ctx.base_lr * mult


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
