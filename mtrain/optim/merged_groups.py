"""One param group per distinct setting, and old per-parameter checkpoints mapped onto them.

mmcv 1.7.2's ``paramwise_cfg`` gives every parameter its own param group (161
for a ResNet-50). The LR and momentum hooks then write every group each
iteration, and ``optimizer.step`` runs its fused (foreach) kernels once per
group. Parameters whose settings are identical can share a group without
changing a number: every optimizer in ``torch.optim`` applies a group's
settings to each of its parameters independently. So
:func:`merge_param_groups` keeps one group per distinct setting, in the order
mmcv meets them, each parameter in the order mmcv visits it::

    [{'params': [w1]}, {'params': [b1], 'lr': 0.02}, {'params': [w2]}]
    -> [{'params': [w1, w2]}, {'params': [b1], 'lr': 0.02}]

Schedules stay exact: a merged group's ``initial_lr`` is what mmcv records for
each of its parameters, so the lr the hook computes for the group is the lr
mmcv computes for each of them.

Checkpoints written with one group per parameter (mtrain before merging, or
a custom constructor) still load: :func:`per_parameter_state_to_merged` maps
their optimizer state onto the merged layout (see
:func:`~mtrain.optim.DefaultOptimizerConstructor`, which registers it as the
optimizer's ``load_state_dict`` pre-hook).
"""

from typing import Any, Dict, List, Optional, Tuple

import torch

Group = Dict[str, Any]

#: Schedule arguments that take one value per param group (mmcv 1.7.2's ``format_param``):
#: a list of them is written for mmcv's layout, one group per parameter. Other lists
#: (a step policy's ``step=[8, 11]``, CosineRestart's ``periods``) are not per group.
PER_GROUP_SCHEDULE_KEYS = {'lr_config': ('max_lr', ),
                           'momentum_config': ('base_momentum', 'max_momentum')}


def keep_groups_per_parameter(optimizer: Any, schedules: Dict[str, Any]
                              ) -> Tuple[Any, Optional[str]]:
    """Whether to merge param groups: the one decision, and the reason to log.

    Returns ``optimizer`` with ``paramwise_cfg.merge_groups=False`` when one of
    ``schedules`` (``{'lr_config': ..., 'momentum_config': ...}``) lists
    :data:`PER_GROUP_SCHEDULE_KEYS` values and ``paramwise_cfg`` does not say,
    with the sentence that says why; else ``(optimizer, None)`` unchanged.
    """
    paramwise = optimizer.get('paramwise_cfg') if isinstance(optimizer, dict) else None
    if not isinstance(paramwise, dict) or 'merge_groups' in paramwise:
        return optimizer, None
    listed = [f'{section}.{key}' for section, keys in PER_GROUP_SCHEDULE_KEYS.items()
              for key in keys if isinstance((schedules.get(section) or {}).get(key),
                                            (list, tuple))]
    if not listed:
        return optimizer, None
    reason = (f'{", ".join(listed)} give one value per param group: param groups are kept one '
              'per parameter, as mmcv 1.x builds them (paramwise_cfg.merge_groups=False)')
    return dict(optimizer, paramwise_cfg=dict(paramwise, merge_groups=False)), reason


def _setting(group: Group) -> Tuple:
    """What makes two groups mergeable: every key but ``params``, and its value.

    A group holding a value that cannot be hashed (a list of names, a tensor)
    is never merged: equality of such values is not worth guessing.
    """
    key = tuple(sorted((k, v) for k, v in group.items() if k != 'params'))
    try:
        hash(key)
    except TypeError:
        return ('(unmergeable)', id(group))
    return key


def merge_param_groups(groups: List[Group], defaults: Optional[Dict[str, Any]] = None
                       ) -> Tuple[List[Group], List[int]]:
    """Merge the groups whose settings (every key but ``params``) are equal.

    A group without a key that ``defaults`` has takes the default first (the
    optimizer would give it that value anyway), so mmcv's bias group
    ``{'lr': 0.01}`` with ``lr_mult`` 1 merges with the plain groups at lr 0.01.

    Args:
        groups: param groups as mmcv builds them, typically one parameter each.
        defaults: the optimizer's base values (``lr``, ``weight_decay``); a
            None value is not filled in.

    Returns:
        ``(merged, position)``: the merged groups (first-seen order, parameters
        in their original order) and, for each parameter of ``groups`` in order,
        its index in the merged optimizer's flat parameter list (what torch
        numbers the optimizer state by).
    """
    merged: List[Group] = []
    index_of: Dict[Tuple, int] = {}
    members: List[Tuple[int, int]] = []  # (merged group, position in it) per parameter
    filled = {k: v for k, v in (defaults or {}).items() if v is not None}
    for group in groups:
        group = dict(filled, **group)
        key = _setting(group)
        if key not in index_of:
            index_of[key] = len(merged)
            merged.append(dict(group, params=[]))
        target = merged[index_of[key]]
        for param in group['params']:
            members.append((index_of[key], len(target['params'])))
            target['params'].append(param)
    starts, total = [], 0
    for group in merged:
        starts.append(total)
        total += len(group['params'])
    return merged, [starts[g] + i for g, i in members]


def per_parameter_state_to_merged(state_dict: Dict[str, Any], optimizer: torch.optim.Optimizer,
                                  position: List[int]) -> Optional[Dict[str, Any]]:
    """An optimizer state saved with one group per parameter, laid out for merged groups.

    Args:
        state_dict: ``optimizer.state_dict()`` of the per-parameter layout.
        optimizer: the optimizer built on the merged groups.
        position: from :func:`merge_param_groups`: the merged flat index of
            each per-parameter group's parameter.

    Returns:
        The state dict to load, or None when ``state_dict`` is not that old
        layout (it then loads as it is, or fails with torch's own message).

    Raises:
        ValueError: the saved groups that now share a group had different
            settings (the checkpoint was not written for this model and config).
    """
    saved = state_dict.get('param_groups', [])
    if (len(saved) == len(optimizer.param_groups) or len(saved) != len(position)
            or any(len(g['params']) != 1 for g in saved)):
        return None
    old_of_new = {new: old for old, new in enumerate(position)}
    groups, start = [], 0
    for group in optimizer.param_groups:
        indices = list(range(start, start + len(group['params'])))
        start += len(indices)
        olds = [old_of_new[i] for i in indices]
        settings = {k: v for k, v in saved[olds[0]].items() if k != 'params'}
        for old in olds[1:]:
            other = {k: v for k, v in saved[old].items() if k != 'params'}
            if other != settings:
                raise ValueError(
                    'the checkpoint\'s optimizer has one param group per parameter, and '
                    f'groups {olds[0]} and {old} differ ({settings} vs {other}) although '
                    'this config puts their parameters in one group. Resume with the '
                    'config the checkpoint was written with, or load only the weights '
                    '(load_from instead of resume_from).')
        groups.append(dict(settings, params=indices))
    state = {position[int(old)]: value for old, value in state_dict.get('state', {}).items()}
    return dict(state_dict, state=state, param_groups=groups)
