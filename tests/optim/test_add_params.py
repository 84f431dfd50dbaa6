"""add_params is DefaultOptimizerConstructor's override point, as in mmcv 1.7.2 (issues 21, 24).

The constructors below are written the way 1.x-era codebases wrote theirs
(mmseg 0.x / BEiT layer-wise lr decay, a ConvNeXt-style per-parameter one, and
a subclass that adjusts the default groups): each overrides ``add_params`` and
reads its own ``paramwise_cfg`` keys.
"""

import logging

import pytest
import torch
from torch import nn

from mtrain.optim import DefaultOptimizerConstructor, build_optimizer
from mtrain.registry import OPTIMIZER_CONSTRUCTORS

LR, WD = 0.1, 0.05


class TinyViT(nn.Module):
    """cls_token/pos_embed, patch_embed, 3 blocks, a head: the names layer decay reads."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, 4))
        self.patch_embed = nn.Linear(4, 4)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(4), nn.Linear(4, 4)) for _ in range(3))
        self.head = nn.Linear(4, 2)


def layer_id(name: str, num_layers: int) -> int:
    if name in ('cls_token', ) or name.startswith('patch_embed'):
        return 0
    if name.startswith('blocks.'):
        return int(name.split('.')[1]) + 1
    return num_layers + 1


@OPTIMIZER_CONSTRUCTORS.register_module(force=True)
class ViTLayerDecayConstructor(DefaultOptimizerConstructor):
    """mmseg 0.x / BEiT style: one group per (layer, decay/no-decay), lists of names inside."""

    def add_params(self, params, module, prefix='', is_dcn_module=None):
        num_layers = self.paramwise_cfg['num_layers']
        decay_rate = self.paramwise_cfg['decay_rate']
        groups = {}
        for name, param in module.named_parameters():
            if not param.requires_grad:
                continue
            no_decay = param.ndim == 1 or name == 'cls_token'
            lid = layer_id(name, num_layers)
            key = f'layer_{lid}_{"no_decay" if no_decay else "decay"}'
            if key not in groups:
                scale = decay_rate ** (num_layers + 1 - lid)
                groups[key] = {'weight_decay': 0. if no_decay else self.base_wd, 'params': [],
                               'param_names': [], 'lr_scale': scale, 'group_name': key,
                               'lr': scale * self.base_lr}
            groups[key]['params'].append(param)
            groups[key]['param_names'].append(name)
        params.extend(groups.values())


@OPTIMIZER_CONSTRUCTORS.register_module(force=True)
class PerParamDecayConstructor(DefaultOptimizerConstructor):
    """ConvNeXt style: one group per parameter with an lr_scale; groups are hashable."""

    def add_params(self, params, module, prefix='', is_dcn_module=None):
        num_layers, rate = self.paramwise_cfg['num_layers'], self.paramwise_cfg['decay_rate']
        for name, param in module.named_parameters():
            scale = rate ** (num_layers + 1 - layer_id(name, num_layers))
            params.append({'params': [param], 'lr': self.base_lr * scale, 'lr_scale': scale,
                           'weight_decay': 0. if param.ndim == 1 or name == 'cls_token'
                           else self.base_wd})


@OPTIMIZER_CONSTRUCTORS.register_module(force=True)
class HalfHeadConstructor(DefaultOptimizerConstructor):
    """Calls the default rules, then halves the head's lr in the groups it made."""

    def add_params(self, params, module, prefix='', is_dcn_module=None):
        start = len(params)
        super().add_params(params, module, prefix, is_dcn_module)
        if prefix == 'head':
            for group in params[start:]:
                group['lr'] = group.get('lr', self.base_lr) * self.paramwise_cfg['head_scale']


def _per_param(optimizer, model):
    names = {id(p): n for n, p in model.named_parameters()}
    return {names[id(p)]: (g['lr'], g['weight_decay']) for g in optimizer.param_groups
            for p in g['params']}


def _expected_layer_decay(model, rate=0.5, num_layers=3):
    return {n: (LR * rate ** (num_layers + 1 - layer_id(n, num_layers)),
                0. if p.ndim == 1 or n == 'cls_token' else WD)
            for n, p in model.named_parameters()}


@pytest.mark.parametrize('constructor', ['ViTLayerDecayConstructor', 'PerParamDecayConstructor'])
def test_a_layer_decay_add_params_override_decides_every_parameter(constructor):
    model = TinyViT()
    optimizer = build_optimizer(model, dict(
        type='AdamW', lr=LR, weight_decay=WD, constructor=constructor,
        paramwise_cfg=dict(num_layers=3, decay_rate=0.5)))  # the subclass's own keys
    per_param = _per_param(optimizer, model)
    for name, (lr, wd) in _expected_layer_decay(model).items():
        assert per_param[name][0] == pytest.approx(lr, rel=1e-12), name
        assert per_param[name][1] == pytest.approx(wd, rel=1e-12), name


def test_unmergeable_groups_stay_as_the_subclass_made_them():
    model = TinyViT()
    optimizer = build_optimizer(model, dict(
        type='SGD', lr=LR, weight_decay=WD, constructor='ViTLayerDecayConstructor',
        paramwise_cfg=dict(num_layers=3, decay_rate=0.5)))
    assert [g['group_name'] for g in optimizer.param_groups][:2] == [
        'layer_0_no_decay', 'layer_0_decay']  # cls_token first, as the subclass ordered them
    assert all('param_names' in g and 'lr_scale' in g for g in optimizer.param_groups)


def test_merging_keeps_values_and_merge_groups_false_keeps_one_group_per_parameter():
    model = TinyViT()
    cfg = dict(type='SGD', lr=LR, weight_decay=WD, constructor='PerParamDecayConstructor',
               paramwise_cfg=dict(num_layers=3, decay_rate=0.5))
    merged = build_optimizer(model, cfg)
    assert len(merged.param_groups) < len(list(model.parameters()))
    cfg['paramwise_cfg']['merge_groups'] = False
    per_param = build_optimizer(model, cfg)
    assert [g['params'] for g in per_param.param_groups] == [[p] for p in model.parameters()]
    assert _per_param(merged, model) == _per_param(per_param, model)


def test_a_subclass_calling_super_add_params_changes_only_what_it_changes():
    model = TinyViT()
    optimizer = build_optimizer(model, dict(
        type='SGD', lr=LR, weight_decay=WD, constructor='HalfHeadConstructor',
        paramwise_cfg=dict(head_scale=0.5, norm_decay_mult=0.)))
    values = _per_param(optimizer, model)
    assert values['head.weight'] == (LR * 0.5, WD) and values['head.bias'] == (LR * 0.5, WD)
    assert values['blocks.0.0.weight'] == (LR, 0.) and values['patch_embed.weight'] == (LR, WD)


def test_the_base_still_refuses_its_own_typos():
    from mtrain.utils import ConfigError
    with pytest.raises(ConfigError, match='norm_decay_mult'):
        build_optimizer(TinyViT(), dict(type='SGD', lr=LR, weight_decay=WD,
                                        paramwise_cfg=dict(norm_decay_mul=0.)))


def test_an_override_without_paramwise_cfg_is_not_silently_ignored(caplog):
    log = logging.getLogger('mtrain.optim')
    log.addHandler(caplog.handler)
    try:
        build_optimizer(TinyViT(), dict(type='SGD', lr=LR, constructor='HalfHeadConstructor'))
    finally:
        log.removeHandler(caplog.handler)
    assert any('overrides add_params' in r.getMessage() and r.levelno == logging.WARNING
               for r in caplog.records)
