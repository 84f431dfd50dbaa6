"""The default optimizer constructor: param groups from ``paramwise_cfg``, then the optimizer."""

import logging
from typing import Any, Dict, List, Optional

import torch
from torch import nn

from ..registry import OPTIMIZER_CONSTRUCTORS, OPTIMIZERS, build
from ..utils.errors import ConfigError
from .merged_groups import per_parameter_state_to_merged
from .param_groups import CFG_KEY, plan_param_groups, validate_paramwise_cfg

logger = logging.getLogger(__name__)


@OPTIMIZER_CONSTRUCTORS.register_module()
class DefaultOptimizerConstructor:
    """Build a torch optimizer for a model, per-parameter settings from ``paramwise_cfg``.

    Without ``paramwise_cfg`` every parameter shares ``optimizer_cfg``'s settings
    (the optimizer gets ``model.parameters()``). With it, each parameter gets
    mmcv 1.7.2's lr and weight decay (:func:`mtrain.optim.plan_param_groups`),
    and the parameters with equal settings share one param group: a handful of
    groups instead of one per parameter, so the schedule hooks and the fused
    optimizer kernels run once per setting. A checkpoint written with one group
    per parameter still resumes: the optimizer maps it onto the merged groups
    when it loads it. Config::

        optimizer = dict(type='SGD', lr=0.01, momentum=0.9, weight_decay=1e-4,
                         paramwise_cfg=dict(norm_decay_mult=0.,
                                            custom_keys={'backbone': dict(lr_mult=0.1)}))

    Assumptions, and the way out when they do not hold:

    - A model whose ``.module`` holds all of its parameters (DataParallel, DDP and
      other wrappers) is unwrapped, so parameter names (what ``custom_keys`` match)
      do not start with ``module.``.
    - The optimizer takes ``params`` plus the config's keyword arguments. For any
      other grouping (e.g. one group per layer-wise decay rate), register your own
      constructor in ``OPTIMIZER_CONSTRUCTORS`` and name it in
      ``optimizer.constructor``; it receives ``optimizer_cfg`` and ``paramwise_cfg``.
    - Code that expects one param group per parameter (mmcv's layout) reads
      ``explain_param_groups`` instead, or builds from
      ``get_param_groups(..., merge=False)``.

    Args:
        optimizer_cfg: the ``optimizer`` dict without ``constructor`` and
            ``paramwise_cfg``: ``type`` and the optimizer's arguments.
        paramwise_cfg: per-parameter options (``docs/optimizer.md``). Default: None.

    Raises:
        ConfigError: a malformed ``optimizer_cfg`` or ``paramwise_cfg`` (when built).
    """

    def __init__(self, optimizer_cfg: Dict[str, Any],
                 paramwise_cfg: Optional[Dict[str, Any]] = None) -> None:
        if not isinstance(optimizer_cfg, dict):
            raise ConfigError('the optimizer config must be a dict such as '
                              f"dict(type='SGD', lr=0.01), got {optimizer_cfg!r}.",
                              key='optimizer')
        self.optimizer_cfg = dict(optimizer_cfg)
        self.base_lr = optimizer_cfg.get('lr')
        self.base_wd = optimizer_cfg.get('weight_decay')
        # Fail at build time, before any model exists, as mmcv does.
        self.paramwise_cfg = validate_paramwise_cfg(paramwise_cfg, self.base_lr, self.base_wd)

    def __call__(self, model: nn.Module) -> torch.optim.Optimizer:
        """The optimizer for ``model`` (or for ``model.module`` of a wrapper)."""
        model = unwrap_model(model)
        if not self.paramwise_cfg:
            optimizer = build(dict(self.optimizer_cfg, params=model.parameters()), OPTIMIZERS,
                              key='optimizer')
            logger.info(summarize_optimizer(optimizer, False))
            return optimizer
        plan = plan_param_groups(model, self.base_lr, self.base_wd, self.paramwise_cfg)
        _check_no_duplicates(plan.rows)
        optimizer = build(dict(self.optimizer_cfg, params=plan.groups), OPTIMIZERS,
                          key='optimizer')
        position = plan.position
        optimizer.register_load_state_dict_pre_hook(
            lambda opt, state: per_parameter_state_to_merged(state, opt, position))
        skipped = sum(not row['in_optimizer'] for row in plan.rows)
        logger.info(summarize_optimizer(optimizer, True, skipped))
        return optimizer


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
        skipped: duplicates left out by ``bypass_duplicate``.
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
        details.append(f'{skipped} duplicate{"s" if skipped != 1 else ""} skipped')
    if not paramwise:
        return f"{line}; no paramwise_cfg{f', {frozen} frozen' if frozen else ''}."
    return f"{line}; {', '.join(details)}."
