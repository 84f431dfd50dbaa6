"""The default optimizer constructors: ``add_params`` walks the model, then the optimizer.

``DefaultOptimizerConstructor`` is mmcv 1.7.2's, override points included:
``__call__`` builds the param groups by calling ``self.add_params(params,
model)``, which recurses through the module tree, so a subclass that overrides
``add_params`` (the layer-decay constructors of mmseg, BEiT, ConvNeXt) decides
every parameter it visits. ``DefaultOptimWrapperConstructor`` is the same walk
with mmengine 0.10's rules; mtrain trains mmengine-schema configs with it.
"""

import logging
from typing import Any, Dict, List, Optional

import torch
from torch import nn

from ..registry import OPTIMIZER_CONSTRUCTORS, OPTIMIZERS, build
from ..utils.errors import ConfigError, ConfigTypeError
from .merged_groups import merge_param_groups, per_parameter_state_to_merged
from . import param_groups as rules
from .param_groups import (CFG_KEY, ENGINE_PARAMWISE_KEYS, PARAMWISE_KEYS, ParamContext,
                           ParamGroupPlan, mmcv_rules, mmengine_rules,
                           unused_key_message, validate_paramwise_cfg)

logger = logging.getLogger(__name__)


@OPTIMIZER_CONSTRUCTORS.register_module()
class DefaultOptimizerConstructor:
    """Build a torch optimizer for a model, per-parameter settings from ``paramwise_cfg``.

    Without ``paramwise_cfg`` every parameter shares ``optimizer_cfg``'s settings
    (the optimizer gets ``model.parameters()``, and ``add_params`` is not
    called, as in mmcv). With it, :meth:`add_params` gives each parameter its
    own group with mmcv 1.7.2's lr and weight decay; then the groups with equal
    settings are merged into one (values unchanged, fewer groups for the
    schedule hooks and the fused kernels). Config::

        optimizer = dict(type='SGD', lr=0.01, momentum=0.9, weight_decay=1e-4,
                         paramwise_cfg=dict(norm_decay_mult=0.,
                                            custom_keys={'backbone': dict(lr_mult=0.1)}))

    Subclassing, as in mmcv: override ``add_params(params, module, prefix='',
    is_dcn_module=None)`` (append one dict per group to ``params``; call
    ``super().add_params`` for the default rules) and read your own options
    from ``self.paramwise_cfg``. Keys the base does not know are accepted in a
    subclass (the base checks unknown keys only for classes that define
    ``paramwise_keys`` themselves, as it does).

    Assumptions, and the way out when they do not hold:

    - Merging groups of equal settings never changes a parameter's values, but
      code that indexes ``optimizer.param_groups`` one per parameter (mmcv's
      layout) sets ``paramwise_cfg=dict(merge_groups=False)`` or, in a
      subclass, ``merge_param_groups = False``. Groups holding values that
      cannot be compared (lists, tensors) are never merged.
    - A model whose ``.module`` holds all of its parameters (DataParallel, DDP
      and other wrappers) is unwrapped, so names do not start with ``module.``.

    Args:
        optimizer_cfg: the ``optimizer`` dict without ``constructor`` and
            ``paramwise_cfg``: ``type`` and the optimizer's arguments.
        paramwise_cfg: per-parameter options (``docs/optimizer.md``). Default: None.

    Raises:
        ConfigError: a malformed ``optimizer_cfg`` or ``paramwise_cfg`` (when built);
            an ``optimizer_cfg`` that is not a dict is also a ``TypeError``, as in mmcv.
    """

    #: The ``paramwise_cfg`` keys this class reads (a subclass that does not
    #: define its own accepts any other key).
    paramwise_keys = PARAMWISE_KEYS
    #: The fields a ``custom_keys`` entry may have (None: any).
    custom_key_fields: Optional[tuple] = ('lr_mult', 'decay_mult')
    #: Merge the groups of equal settings after ``add_params``.
    merge_param_groups = True

    def __init__(self, optimizer_cfg: Dict[str, Any],
                 paramwise_cfg: Optional[Dict[str, Any]] = None) -> None:
        if not isinstance(optimizer_cfg, dict):
            raise ConfigTypeError('the optimizer config must be a dict such as '
                                  f"dict(type='SGD', lr=0.01), got {optimizer_cfg!r}.",
                                  key='optimizer')
        self.optimizer_cfg = optimizer_cfg
        self.paramwise_cfg = {} if paramwise_cfg is None else paramwise_cfg
        self.base_lr = optimizer_cfg.get('lr', None)
        self.base_wd = optimizer_cfg.get('weight_decay', None)
        self.last_plan: Optional[ParamGroupPlan] = None  # what the last call decided
        self._validate_cfg()

    def _validate_cfg(self) -> None:
        """Fail at build time, before any model exists, as mmcv does."""
        strict = 'paramwise_keys' in type(self).__dict__
        validate_paramwise_cfg(self.paramwise_cfg, self.base_lr, self.base_wd,
                               known=self.paramwise_keys if strict else None,
                               custom_fields=self.custom_key_fields if strict else None)

    def _is_in(self, param_group: Dict[str, Any], param_group_list: List[Dict[str, Any]]
               ) -> bool:
        """Whether a parameter of ``param_group`` is already in one of ``param_group_list``."""
        params = set(param_group['params'])
        return any(not params.isdisjoint(group['params']) for group in param_group_list)

    def add_params(self, params: List[Dict[str, Any]], module: nn.Module, prefix: str = '',
                   is_dcn_module: Any = None) -> None:
        """Append a param group for each parameter of ``module``, then recurse into its children.

        Args:
            params: the param groups so far; modified in place.
            module: the module whose own parameters are added now.
            prefix: ``module``'s dotted name in the model ('' for the model).
            is_dcn_module: whether ``module``'s parent is a deformable conv
                (``dcn_offset_lr_mult`` then applies to its ``conv_offset``).
        """
        for name, param in module.named_parameters(recurse=False):
            ctx = ParamContext(module, prefix, name, param, is_dcn_module, self.base_lr,
                               self.base_wd, self.paramwise_cfg)
            group = self._param_group(params, ctx)
            if group is not None:
                params.append(group)
        child_is_dcn = rules.is_dcn_module(module)  # the argument shadows the name
        for child_name, child in module.named_children():
            child_prefix = f'{prefix}.{child_name}' if prefix else child_name
            self.add_params(params, child, prefix=child_prefix, is_dcn_module=child_is_dcn)

    def _param_group(self, params: List[Dict[str, Any]], ctx: ParamContext
                     ) -> Optional[Dict[str, Any]]:
        """mmcv's rules; a frozen parameter is kept with the base settings.

        mmcv adds a frozen parameter before its duplicate check, so a shared
        frozen parameter reaches torch twice and fails; with
        ``bypass_duplicate=True`` mtrain skips it like any duplicate.
        """
        group: Dict[str, Any] = {'params': [ctx.param]}
        if self.paramwise_cfg.get('bypass_duplicate', False) and self._is_in(group, params):
            return self._record(ctx, None, 'duplicate')
        if not ctx.param.requires_grad:
            return self._record(ctx, group, 'frozen')
        return self._record(ctx, group, mmcv_rules(group, ctx))

    def _record(self, ctx: ParamContext, group: Optional[Dict[str, Any]],
                rule: str) -> Optional[Dict[str, Any]]:
        """Note which rule decided ``ctx``'s parameter (for explain), return ``group``."""
        if getattr(self, '_visits', None) is not None:
            self._visits.append((ctx.full_name, ctx.param, rule, group))
        if rule == 'duplicate':
            logger.warning(f"'{ctx.full_name}' is a parameter seen before; it is left out of "
                           'the optimizer because bypass_duplicate=True.')
        return group

    def plan(self, model: nn.Module) -> ParamGroupPlan:
        """Run ``add_params`` on ``model`` and say what it decided, per parameter."""
        model = unwrap_model(model)
        params: List[Dict[str, Any]] = []
        self._visits: Optional[list] = []
        try:
            self.add_params(params, model)
            rows = _rows(model, params, self._visits, self.base_lr, self.base_wd,
                         f'{type(self).__name__}.add_params')
        finally:
            self._visits = None
        custom = self.paramwise_cfg.get('custom_keys', {}) or {}
        used = {row['rule'][len('custom_keys:'):] for row in rows
                if row['rule'].startswith('custom_keys:')}
        unused = [k for k in custom if k not in used]
        for pattern in unused:
            logger.warning(unused_key_message(pattern, [row['name'] for row in rows]))
        merge = self.paramwise_cfg.get('merge_groups', self.merge_param_groups)
        if merge:
            groups, position = merge_param_groups(
                params, dict(lr=self.base_lr, weight_decay=self.base_wd))
        else:
            groups, position = params, list(range(sum(len(g['params']) for g in params)))
        return ParamGroupPlan(groups, rows, unused, params, position)

    def __call__(self, model: nn.Module) -> torch.optim.Optimizer:
        """The optimizer for ``model`` (or for ``model.module`` of a wrapper)."""
        model = unwrap_model(model)
        if not self.paramwise_cfg:
            _warn_if_add_params_unused(self)
            optimizer = build(dict(self.optimizer_cfg, params=model.parameters()), OPTIMIZERS,
                              key='optimizer')
            logger.info(summarize_optimizer(optimizer, False))
            return optimizer
        plan = self.last_plan = self.plan(model)
        _check_no_duplicates(plan.rows)
        optimizer = build(dict(self.optimizer_cfg, params=plan.groups), OPTIMIZERS,
                          key='optimizer')
        if len(plan.groups) != len(plan.per_param_groups):
            position = plan.position
            optimizer.register_load_state_dict_pre_hook(
                lambda opt, state: per_parameter_state_to_merged(state, opt, position))
        skipped = sum(not row['in_optimizer'] for row in plan.rows)
        logger.info(summarize_optimizer(optimizer, True, skipped))
        return optimizer


@OPTIMIZER_CONSTRUCTORS.register_module()
class DefaultOptimWrapperConstructor(DefaultOptimizerConstructor):
    """mmengine 0.10's ``paramwise_cfg`` rules on mtrain's optimizer config.

    What an mmengine-schema config means (``tools/train.py`` and the converter
    pick it for ``optim_wrapper``): only the multipliers a config sets apply;
    ``bias_decay_mult`` comes before ``dwconv_decay_mult`` and, unless
    ``norm_decay_mult`` is set, reaches norm biases too; ``flat_decay_mult``
    scales the decay of any other 1-d parameter; frozen parameters stay out
    of the optimizer; a custom key's other fields (``momentum``, ...) are
    copied into its group. Config::

        optimizer = dict(type='AdamW', lr=1e-3, weight_decay=0.05,
                         constructor='DefaultOptimWrapperConstructor',
                         paramwise_cfg=dict(bias_decay_mult=0., flat_decay_mult=0.))
    """

    paramwise_keys = ENGINE_PARAMWISE_KEYS
    custom_key_fields = None

    def _param_group(self, params: List[Dict[str, Any]], ctx: ParamContext
                     ) -> Optional[Dict[str, Any]]:
        """mmengine's order: duplicates, then frozen parameters (left out), then the rules."""
        group: Dict[str, Any] = {'params': [ctx.param]}
        if self.paramwise_cfg.get('bypass_duplicate', False) and self._is_in(group, params):
            return self._record(ctx, None, 'duplicate')
        if not ctx.param.requires_grad:
            return self._record(ctx, None, 'frozen')
        return self._record(ctx, group, mmengine_rules(group, ctx))


def _rows(model: nn.Module, params: List[Dict[str, Any]], visits: list,
          base_lr: Any, base_wd: Any, subclass_rule: str) -> List[Dict[str, Any]]:
    """One row per parameter: the base's visits, then what a subclass added itself.

    Values are read from the groups after ``add_params`` returned, so a
    subclass that changes a group the base made is shown with its change.
    """
    recorded = {id(group) for _, _, _, group in visits if group is not None}
    first: Dict[int, str] = {}
    rows = []
    for name, param, rule, group in visits:
        rows.append(_row(name, param, rule, group, first, base_lr, base_wd))
    names = _names(model)
    for group in params:
        if id(group) in recorded:
            continue
        for param in group['params']:
            name = names.get(id(param), f'(not in the model: {tuple(param.shape)})')
            rows.append(_row(name, param, subclass_rule, group, first, base_lr, base_wd))
    return rows


def _row(name: str, param: torch.Tensor, rule: str, group: Optional[Dict[str, Any]],
         first: Dict[int, str], base_lr: Any, base_wd: Any) -> Dict[str, Any]:
    first_name = first.setdefault(id(param), name)
    return {'name': name, 'shape': tuple(param.shape), 'rule': rule,
            'lr': None if group is None else group.get('lr', base_lr),
            'weight_decay': None if group is None else group.get('weight_decay', base_wd),
            'in_optimizer': group is not None,
            'duplicate_of': first_name if first_name != name else None}


def _names(model: nn.Module) -> Dict[int, str]:
    names: Dict[int, str] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(param), name)
    return names


def _warn_if_add_params_unused(constructor: DefaultOptimizerConstructor) -> None:
    """mmcv skips ``add_params`` without ``paramwise_cfg``; an override then never runs."""
    cls = type(constructor)
    if cls.add_params is not DefaultOptimizerConstructor.add_params:
        logger.warning(f'{cls.__name__} overrides add_params, but optimizer.paramwise_cfg is '
                       'empty, so (as in mmcv) every parameter gets the optimizer\'s own '
                       'settings and add_params is not called. Set the options your '
                       'add_params reads in optimizer.paramwise_cfg.')


def unwrap_model(model: nn.Module) -> nn.Module:
    """``model.module`` when it holds every parameter of ``model`` (a wrapper), else ``model``.

    mmcv unwraps any model with a ``module`` attribute, which silently drops the
    other parameters of a model that merely has a sub-module called ``module``.
    """
    inner = getattr(model, 'module', None)
    if not isinstance(inner, nn.Module):
        return model
    inner_ids = {id(p) for p in inner.parameters()}
    if all(id(p) in inner_ids for p in model.parameters()):
        return inner
    return model


def _check_no_duplicates(rows: List[Dict[str, Any]]) -> None:
    """A parameter in two groups makes torch fail; say which and how to fix it."""
    for row in rows:
        if row['duplicate_of'] is not None and row['in_optimizer']:
            raise ConfigError(
                f"'{row['name']}' is the same parameter as '{row['duplicate_of']}' (a shared "
                'module or tied weight), and torch optimizers reject a parameter in two param '
                'groups. Set paramwise_cfg.bypass_duplicate=True to keep only its first '
                'occurrence.', key=f'{CFG_KEY}.bypass_duplicate')


def summarize_optimizer(optimizer: torch.optim.Optimizer, paramwise: bool = True,
                        skipped: int = 0) -> str:
    """One line: groups, parameters, and how many parameters differ from the defaults.

    Example: ``optimizer SGD: 3 param groups for 12 parameter tensors (lr=0.01,
    weight_decay=0.0001); lr scaled for 2, weight decay scaled for 4, 1 frozen.``

    Args:
        optimizer: the built optimizer.
        paramwise: whether a ``paramwise_cfg`` decided the groups.
        skipped: parameters left out (duplicates, or frozen under mmengine's rules).
    """
    defaults = optimizer.defaults
    groups = optimizer.param_groups
    n_params = sum(len(g['params']) for g in groups)
    base = ', '.join(f'{k}={defaults[k]}' for k in ('lr', 'weight_decay') if k in defaults)
    line = (f'optimizer {type(optimizer).__name__}: {len(groups)} param '
            f"group{'s' if len(groups) != 1 else ''} for {n_params} parameter tensors"
            + (f' ({base})' if base else ''))
    details = []
    for key, label in (('lr', 'lr'), ('weight_decay', 'weight decay')):
        if key in defaults:
            changed = sum(len(g['params']) for g in groups if g.get(key) != defaults[key])
            details.append(f'{label} scaled for {changed}')
    frozen = sum(not p.requires_grad for g in groups for p in g['params'])
    if frozen:
        details.append(f'{frozen} frozen')
    if skipped:
        details.append(f'{skipped} left out')
    if not paramwise:
        return f"{line}; no paramwise_cfg{f', {frozen} frozen' if frozen else ''}."
    return f"{line}; {', '.join(details)}."


def plan_param_groups(model: nn.Module, base_lr: Optional[float], base_wd: Optional[float],
                      paramwise_cfg: Optional[Dict[str, Any]],
                      constructor: type = DefaultOptimizerConstructor) -> ParamGroupPlan:
    """What ``constructor`` (default: mmcv's rules) decides for ``model``, and why.

    Unused ``custom_keys`` are logged as warnings (a config shared by models
    that differ may hold keys for the others), as in training.
    """
    optimizer_cfg = {k: v for k, v in (('lr', base_lr), ('weight_decay', base_wd))
                     if v is not None}
    return constructor(optimizer_cfg, dict(paramwise_cfg or {})).plan(model)


def get_param_groups(model: nn.Module, base_lr: Optional[float], base_wd: Optional[float],
                     paramwise_cfg: Optional[Dict[str, Any]],
                     merge: bool = True) -> List[Dict[str, Any]]:
    """The param groups for ``paramwise_cfg``: one per distinct setting.

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
    joined by ``+`` when two apply, else ``'default'``; a subclass's own
    groups: ``'<Class>.add_params'``); ``lr`` and ``weight_decay`` (effective
    values, the base where no rule set one; None for a parameter left out or
    an unset base); ``in_optimizer``; ``duplicate_of`` (the first name of a
    parameter seen before, else None).
    """
    return plan_param_groups(model, base_lr, base_wd, paramwise_cfg).rows
