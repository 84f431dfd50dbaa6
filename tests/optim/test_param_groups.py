"""get_param_groups against mmcv 1.7.2, the rules' edge cases, and paramwise_cfg validation.

Ground truth: MMCV_EXPECTED below was produced by running mmcv 1.7.2's own
``DefaultOptimizerConstructor.add_params`` (default_constructor.py from the PyPI
sdist mmcv-1.7.2.tar.gz) outside the repo, with its imports stubbed
(``check_ops_exist() -> True`` and ``mmcv.ops.DeformConv2d`` bound to the
``DeformConv2dPack`` stand-in below), on these same models and CASES, and
pasting the groups it returned. Nothing here is derived from mtrain's code.
"""

import logging

import pytest
import torch
from torch import nn

from mtrain.optim import explain_param_groups, get_param_groups, plan_param_groups
from mtrain.optim.param_groups import is_dcn_module, is_depthwise_conv
from mtrain.utils import ConfigError

LR, WD = 0.01, 1e-4

class DeformConv2d(nn.Module):
    """Stands in for mmcv.ops.DeformConv2d: own weight and bias."""

    def __init__(self, in_channels: int = 3, out_channels: int = 4) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(out_channels, in_channels, 3, 3))
        self.bias = nn.Parameter(torch.zeros(out_channels))


class DeformConv2dPack(DeformConv2d):
    """Stands in for mmcv.ops.DeformConv2dPack: a DeformConv2d with a ``conv_offset`` child."""

    def __init__(self, in_channels: int = 3, out_channels: int = 4) -> None:
        super().__init__(in_channels, out_channels)
        self.conv_offset = nn.Conv2d(in_channels, 18, kernel_size=3, padding=1)


class SubModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.param1 = nn.Parameter(torch.ones(1))
        self.frozen = nn.Parameter(torch.ones(1), requires_grad=False)
        self.conv1 = nn.Conv2d(2, 2, kernel_size=1, groups=2)  # depthwise
        self.gn = nn.GroupNorm(2, 2)


class ExampleModel(nn.Module):
    """mmcv's test model plus a LayerNorm, a one-channel conv and a DCN stand-in."""

    def __init__(self) -> None:
        super().__init__()
        self.param1 = nn.Parameter(torch.ones(1))
        self.conv1 = nn.Conv2d(3, 4, kernel_size=1, bias=False)
        self.conv2 = nn.Conv2d(4, 2, kernel_size=1)
        self.bn = nn.BatchNorm2d(2)
        self.sub = SubModel()
        self.ln = nn.LayerNorm(2)
        self.mono = nn.Conv2d(1, 2, kernel_size=1)  # groups == in_channels == 1: mmcv's dwconv
        self.dcn = DeformConv2dPack()


class DuplicateModel(ExampleModel):
    """``head.0`` is ``conv2``; ``sub.tied`` is ``param1``."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Sequential(self.conv2)
        self.sub.tied = self.param1


ALL = dict(bias_lr_mult=2., bias_decay_mult=0.5, norm_decay_mult=0., dwconv_decay_mult=0.1,
           dcn_offset_lr_mult=0.1)
CUSTOM = dict(custom_keys={'param1': dict(lr_mult=10), 'sub': dict(lr_mult=0.1, decay_mult=0),
                           'sub.gn': dict(lr_mult=0.01)},
              # mmcv's own test also had 'non_exist_key' here; a key that matches no
              # parameter is a warning (see test_key_matching_nothing_is_a_warning).
              norm_decay_mult=0.5, bias_lr_mult=2.)
# case -> (model class, base lr, base weight decay, paramwise_cfg)
CASES = {
    'empty': (ExampleModel, LR, WD, {}),
    'bias_lr_mult': (ExampleModel, LR, WD, dict(bias_lr_mult=2.)),
    'bias_decay_mult': (ExampleModel, LR, WD, dict(bias_decay_mult=0.5)),
    'norm_decay_mult': (ExampleModel, LR, WD, dict(norm_decay_mult=0.)),
    'dwconv_decay_mult': (ExampleModel, LR, WD, dict(dwconv_decay_mult=0.1)),
    'dcn_offset_lr_mult': (ExampleModel, LR, WD, dict(dcn_offset_lr_mult=0.1)),
    'all': (ExampleModel, LR, WD, ALL),
    'custom_keys': (ExampleModel, LR, WD, CUSTOM),
    'no_weight_decay': (ExampleModel, LR, None, dict(
        bias_lr_mult=2., dcn_offset_lr_mult=0.1, custom_keys={'sub.gn': dict(lr_mult=0.1)})),
    'bypass_duplicate': (DuplicateModel, LR, WD, dict(ALL, bypass_duplicate=True)),
}

# Groups that got an lr and/or a weight_decay from mmcv ('-': key absent; 'skipped': left out
# by bypass_duplicate). A parameter not listed is a group of its own with neither key.
MMCV_EXPECTED = {
    'empty': '''
        conv2.bias              0.01                    0.0001
        bn.weight               -                       0.0001
        bn.bias                 -                       0.0001
        sub.conv1.weight        -                       0.0001
        sub.conv1.bias          0.01                    0.0001
        sub.gn.weight           -                       0.0001
        sub.gn.bias             -                       0.0001
        ln.weight               -                       0.0001
        ln.bias                 -                       0.0001
        mono.weight             -                       0.0001
        mono.bias               0.01                    0.0001
        dcn.bias                0.01                    0.0001
        dcn.conv_offset.weight  0.01                    -
        dcn.conv_offset.bias    0.01                    -
    ''',
    'bias_lr_mult': '''
        conv2.bias              0.02                    0.0001
        bn.weight               -                       0.0001
        bn.bias                 -                       0.0001
        sub.conv1.weight        -                       0.0001
        sub.conv1.bias          0.02                    0.0001
        sub.gn.weight           -                       0.0001
        sub.gn.bias             -                       0.0001
        ln.weight               -                       0.0001
        ln.bias                 -                       0.0001
        mono.weight             -                       0.0001
        mono.bias               0.02                    0.0001
        dcn.bias                0.02                    0.0001
        dcn.conv_offset.weight  0.01                    -
        dcn.conv_offset.bias    0.01                    -
    ''',
    'bias_decay_mult': '''
        conv2.bias              0.01                    5e-05
        bn.weight               -                       0.0001
        bn.bias                 -                       0.0001
        sub.conv1.weight        -                       0.0001
        sub.conv1.bias          0.01                    0.0001
        sub.gn.weight           -                       0.0001
        sub.gn.bias             -                       0.0001
        ln.weight               -                       0.0001
        ln.bias                 -                       0.0001
        mono.weight             -                       0.0001
        mono.bias               0.01                    0.0001
        dcn.bias                0.01                    5e-05
        dcn.conv_offset.weight  0.01                    -
        dcn.conv_offset.bias    0.01                    -
    ''',
    'norm_decay_mult': '''
        conv2.bias              0.01                    0.0001
        bn.weight               -                       0.0
        bn.bias                 -                       0.0
        sub.conv1.weight        -                       0.0001
        sub.conv1.bias          0.01                    0.0001
        sub.gn.weight           -                       0.0
        sub.gn.bias             -                       0.0
        ln.weight               -                       0.0
        ln.bias                 -                       0.0
        mono.weight             -                       0.0001
        mono.bias               0.01                    0.0001
        dcn.bias                0.01                    0.0001
        dcn.conv_offset.weight  0.01                    -
        dcn.conv_offset.bias    0.01                    -
    ''',
    'dwconv_decay_mult': '''
        conv2.bias              0.01                    0.0001
        bn.weight               -                       0.0001
        bn.bias                 -                       0.0001
        sub.conv1.weight        -                       1e-05
        sub.conv1.bias          0.01                    1e-05
        sub.gn.weight           -                       0.0001
        sub.gn.bias             -                       0.0001
        ln.weight               -                       0.0001
        ln.bias                 -                       0.0001
        mono.weight             -                       1e-05
        mono.bias               0.01                    1e-05
        dcn.bias                0.01                    0.0001
        dcn.conv_offset.weight  0.01                    -
        dcn.conv_offset.bias    0.01                    -
    ''',
    'dcn_offset_lr_mult': '''
        conv2.bias              0.01                    0.0001
        bn.weight               -                       0.0001
        bn.bias                 -                       0.0001
        sub.conv1.weight        -                       0.0001
        sub.conv1.bias          0.01                    0.0001
        sub.gn.weight           -                       0.0001
        sub.gn.bias             -                       0.0001
        ln.weight               -                       0.0001
        ln.bias                 -                       0.0001
        mono.weight             -                       0.0001
        mono.bias               0.01                    0.0001
        dcn.bias                0.01                    0.0001
        dcn.conv_offset.weight  0.001                   -
        dcn.conv_offset.bias    0.001                   -
    ''',
    'all': '''
        conv2.bias              0.02                    5e-05
        bn.weight               -                       0.0
        bn.bias                 -                       0.0
        sub.conv1.weight        -                       1e-05
        sub.conv1.bias          0.02                    1e-05
        sub.gn.weight           -                       0.0
        sub.gn.bias             -                       0.0
        ln.weight               -                       0.0
        ln.bias                 -                       0.0
        mono.weight             -                       1e-05
        mono.bias               0.02                    1e-05
        dcn.bias                0.02                    5e-05
        dcn.conv_offset.weight  0.001                   -
        dcn.conv_offset.bias    0.001                   -
    ''',
    'custom_keys': '''
        param1                  0.1                     0.0001
        conv2.bias              0.02                    0.0001
        bn.weight               -                       5e-05
        bn.bias                 -                       5e-05
        sub.param1              0.1                     0.0001
        sub.conv1.weight        0.001                   0.0
        sub.conv1.bias          0.001                   0.0
        sub.gn.weight           0.0001                  0.0001
        sub.gn.bias             0.0001                  0.0001
        ln.weight               -                       5e-05
        ln.bias                 -                       5e-05
        mono.weight             -                       0.0001
        mono.bias               0.02                    0.0001
        dcn.bias                0.02                    0.0001
        dcn.conv_offset.weight  0.01                    -
        dcn.conv_offset.bias    0.01                    -
    ''',
    'no_weight_decay': '''
        conv2.bias              0.02                    -
        sub.conv1.bias          0.02                    -
        sub.gn.weight           0.001                   -
        sub.gn.bias             0.001                   -
        mono.bias               0.02                    -
        dcn.bias                0.02                    -
        dcn.conv_offset.weight  0.001                   -
        dcn.conv_offset.bias    0.001                   -
    ''',
    'bypass_duplicate': '''
        conv2.bias              0.02                    5e-05
        bn.weight               -                       0.0
        bn.bias                 -                       0.0
        sub.tied                skipped
        sub.conv1.weight        -                       1e-05
        sub.conv1.bias          0.02                    1e-05
        sub.gn.weight           -                       0.0
        sub.gn.bias             -                       0.0
        ln.weight               -                       0.0
        ln.bias                 -                       0.0
        mono.weight             -                       1e-05
        mono.bias               0.02                    1e-05
        dcn.bias                0.02                    5e-05
        dcn.conv_offset.weight  0.001                   -
        dcn.conv_offset.bias    0.001                   -
        head.0.weight           skipped
        head.0.bias             skipped
    ''',
}


def _parse(table: str) -> dict:
    expected = {}
    for line in table.strip().splitlines():
        name, *values = line.split()
        if values == ['skipped']:
            expected[name] = 'skipped'
        else:
            expected[name] = tuple(None if v == '-' else float(v) for v in values)
    return expected


def _observed(plan) -> dict:
    """The same view of mtrain's plan: name -> (lr, weight_decay) for groups with either."""
    groups = iter(plan.per_param_groups)
    observed = {}
    for row in plan.rows:
        if not row['in_optimizer']:
            observed[row['name']] = 'skipped'
            continue
        group = next(groups)
        assert group['params'][0].shape == row['shape']
        if 'lr' in group or 'weight_decay' in group:
            observed[row['name']] = (group.get('lr'), group.get('weight_decay'))
    assert next(groups, None) is None
    return observed


@pytest.mark.parametrize('case', list(CASES))
def test_groups_match_mmcv(case):
    model_cls, lr, wd, paramwise_cfg = CASES[case]
    model = model_cls()
    plan = plan_param_groups(model, lr, wd, paramwise_cfg)
    expected = _parse(MMCV_EXPECTED[case])
    observed = _observed(plan)
    assert list(observed) == list(expected)
    for name, values in expected.items():
        assert observed[name] == (values if values == 'skipped' else pytest.approx(values)), name
    # One group per visited parameter, each holding exactly that parameter, in visit order.
    assert all(len(g['params']) == 1 for g in plan.per_param_groups)
    assert len(plan.per_param_groups) == sum(row['in_optimizer'] for row in plan.rows)


def test_rules_are_explained():
    rows = {r['name']: r for r in explain_param_groups(ExampleModel(), LR, WD, ALL)}
    assert rows['param1']['rule'] == 'default' and rows['param1']['lr'] == LR
    assert rows['conv2.bias']['rule'] == 'bias'
    assert rows['bn.weight']['rule'] == 'norm' and rows['bn.weight']['weight_decay'] == 0.
    assert rows['sub.conv1.weight']['rule'] == 'dwconv'
    assert rows['sub.conv1.bias']['rule'] == 'bias+dwconv'  # lr from bias, decay from dwconv
    assert rows['dcn.conv_offset.bias']['rule'] == 'dcn_offset'
    assert rows['dcn.conv_offset.bias']['weight_decay'] == WD  # no key: the optimizer's default
    assert rows['sub.frozen']['rule'] == 'frozen' and rows['sub.frozen']['in_optimizer']


def test_longest_custom_key_wins_and_ties_go_alphabetically():
    keys = {'sub': dict(lr_mult=2.), 'sub.gn': dict(lr_mult=3.), 'b.gn': dict(lr_mult=5.),
            'sub.g': dict(lr_mult=4.)}
    rows = {r['name']: r for r in explain_param_groups(ExampleModel(), LR, WD,
                                                       dict(custom_keys=keys))}
    assert rows['sub.gn.weight']['rule'] == 'custom_keys:sub.gn'  # longest of the four
    assert rows['sub.gn.weight']['lr'] == pytest.approx(0.03)
    assert rows['sub.param1']['rule'] == 'custom_keys:sub'
    # 'b.gn' and 'ub.g' have the same length and both match 'sub.gn.bias': 'b.gn' < 'ub.g'.
    tie = {'ub.g': dict(lr_mult=7.), 'b.gn': dict(lr_mult=5.)}
    rows = {r['name']: r for r in explain_param_groups(ExampleModel(), LR, WD,
                                                       dict(custom_keys=tie))}
    assert rows['sub.gn.bias']['rule'] == 'custom_keys:b.gn'
    assert rows['sub.gn.bias']['lr'] == pytest.approx(0.05)


def test_custom_key_switches_off_bias_and_norm_rules():
    cfg = dict(custom_keys={'bn': dict(lr_mult=1.), 'conv2': dict(decay_mult=3.)},
               norm_decay_mult=0., bias_lr_mult=2., bias_decay_mult=0.)
    rows = {r['name']: r for r in explain_param_groups(ExampleModel(), LR, WD, cfg)}
    assert rows['bn.weight']['weight_decay'] == WD and rows['bn.weight']['lr'] == LR
    assert rows['conv2.bias']['lr'] == LR
    assert rows['conv2.bias']['weight_decay'] == pytest.approx(3 * WD)
    assert rows['ln.weight']['weight_decay'] == 0.  # no key matched: the norm rule applies


def test_custom_keys_match_against_prefix_dot_name():
    # mmcv matches f'{prefix}.{name}': a top-level 'param1' is seen as '.param1', while the
    # top-level module 'conv1' is never preceded by a dot.
    def decided(key):
        rows = explain_param_groups(ExampleModel(), LR, WD, dict(custom_keys={key: {}}))
        return [r['name'] for r in rows if r['rule'].startswith('custom_keys')]

    assert decided('.param1') == ['param1', 'sub.param1']
    assert decided('.conv1') == ['sub.conv1.weight', 'sub.conv1.bias']


def test_frozen_parameters_stay_with_base_settings():
    model = ExampleModel()
    cfg = dict(custom_keys={'sub': dict(lr_mult=0.5, decay_mult=0.)})
    groups = get_param_groups(model, LR, WD, cfg, merge=False)
    frozen = [g for g in groups if g['params'][0] is model.sub.frozen]
    assert frozen == [{'params': [model.sub.frozen]}]
    # Merged, it shares the group of the parameters at the base settings.
    [group] = [g for g in get_param_groups(model, LR, WD, cfg)
               if any(p is model.sub.frozen for p in g['params'])]
    assert (group['lr'], group['weight_decay']) == (LR, WD) and len(group['params']) > 1


def test_without_bypass_duplicates_are_kept_as_mmcv_does():
    plan = plan_param_groups(DuplicateModel(), LR, WD, ALL)
    dups = {r['name']: r['duplicate_of'] for r in plan.rows if r['duplicate_of']}
    assert dups == {'sub.tied': 'param1', 'head.0.weight': 'conv2.weight',
                    'head.0.bias': 'conv2.bias'}
    assert len(plan.per_param_groups) == 23


def test_bypass_duplicate_also_skips_frozen_duplicates():
    # mmcv adds a frozen parameter before its duplicate check, so a shared frozen
    # parameter reaches torch twice and fails; mtrain skips it like any duplicate.
    model = ExampleModel()
    model.frozen_again = model.sub.frozen  # the root's parameters are visited first
    plan = plan_param_groups(model, LR, WD, dict(bypass_duplicate=True))
    skipped = [r for r in plan.rows if not r['in_optimizer']]
    assert [(r['name'], r['duplicate_of']) for r in skipped] == [('sub.frozen', 'frozen_again')]


def test_unknown_paramwise_key_names_the_closest():
    with pytest.raises(ConfigError) as err:
        get_param_groups(ExampleModel(), LR, WD, dict(norm_decay_mul=0.))
    msg = str(err.value)
    assert 'optimizer.paramwise_cfg.norm_decay_mul' in msg and "'norm_decay_mult'" in msg


def test_unknown_custom_key_field_names_the_closest():
    with pytest.raises(ConfigError) as err:
        get_param_groups(ExampleModel(), LR, WD, dict(custom_keys={'sub': dict(lr_mul=0.1)}))
    assert 'custom_keys.sub.lr_mul' in str(err.value) and "'lr_mult'" in str(err.value)


@pytest.mark.parametrize('paramwise_cfg, key', [
    (dict(norm_decay_mult=0.), 'optimizer.paramwise_cfg.norm_decay_mult'),
    (dict(custom_keys={'sub': dict(decay_mult=0.)}),
     'optimizer.paramwise_cfg.custom_keys.sub.decay_mult'),
])
def test_decay_multiplier_needs_a_base_weight_decay(paramwise_cfg, key):
    with pytest.raises(ConfigError, match='optimizer.weight_decay is not set') as err:
        get_param_groups(ExampleModel(), LR, None, paramwise_cfg)
    assert err.value.key == key


@pytest.mark.parametrize('paramwise_cfg, lr, key', [
    (dict(bias_lr_mult=-1.), LR, 'optimizer.paramwise_cfg.bias_lr_mult'),
    (dict(bias_lr_mult='2'), LR, 'optimizer.paramwise_cfg.bias_lr_mult'),
    (dict(bypass_duplicate=1), LR, 'optimizer.paramwise_cfg.bypass_duplicate'),
    (dict(custom_keys=['sub']), LR, 'optimizer.paramwise_cfg.custom_keys'),
    ({}, -0.1, 'optimizer.lr'),
])
def test_bad_values_name_their_key(paramwise_cfg, lr, key):
    with pytest.raises(ConfigError) as err:
        get_param_groups(ExampleModel(), lr, WD, paramwise_cfg)
    assert err.value.key == key


def test_a_scaled_lr_without_base_lr_is_a_config_error():
    # mmcv fails here with "unsupported operand type(s) for *: 'NoneType' and 'float'".
    with pytest.raises(ConfigError, match="'conv2.bias'.*optimizer.lr is not set"):
        get_param_groups(ExampleModel(), None, WD, dict(bias_lr_mult=2.))


def test_key_matching_nothing_is_a_warning(caplog):
    """As in mmcv, and needed by shared base configs (Swin's absolute_pos_embed, ape=False)."""
    cfg = dict(CUSTOM, custom_keys=dict(CUSTOM['custom_keys'], sbu=dict(lr_mult=0.)))
    log = logging.getLogger('mtrain.optim')
    log.addHandler(caplog.handler)
    try:
        plan = plan_param_groups(ExampleModel(), LR, WD, cfg)
    finally:
        log.removeHandler(caplog.handler)
    assert plan.unused_custom_keys == ['sbu']
    record = next(r for r in caplog.records if 'sbu' in r.getMessage())
    assert record.levelno == logging.WARNING
    assert "custom_keys['sbu'] decided no parameter: no parameter name contains it" in \
        record.getMessage() and "'sub'" in record.getMessage()
    without = plan_param_groups(ExampleModel(), LR, WD, CUSTOM)
    assert [r['lr'] for r in plan.rows] == [r['lr'] for r in without.rows]


def test_shadowed_custom_key_is_reported_and_logged(caplog):
    cfg = dict(custom_keys={'param1': dict(lr_mult=10), 'param': dict(lr_mult=3)})
    log = logging.getLogger('mtrain.optim')
    log.addHandler(caplog.handler)  # the mtrain logger may not propagate to the root
    try:
        plan = plan_param_groups(ExampleModel(), LR, WD, cfg)
    finally:
        log.removeHandler(caplog.handler)
    assert plan.unused_custom_keys == ['param']
    assert any("'param'" in r.getMessage() and r.levelno == logging.WARNING
               for r in caplog.records)


def test_get_param_groups_does_not_touch_its_inputs():
    model, cfg = ExampleModel(), dict(ALL, custom_keys={'sub': dict(lr_mult=0.1)})
    before = {n: p.clone() for n, p in model.state_dict().items()}
    snapshot = repr(cfg)
    get_param_groups(model, LR, WD, cfg)
    assert repr(cfg) == snapshot
    assert all(torch.equal(before[n], p) for n, p in model.state_dict().items())


def test_module_kinds():
    class ModulatedDeformConv2d(nn.Module):
        pass

    class ModulatedDeformConv2dPack(ModulatedDeformConv2d):
        pass

    class FeatureAdaption(nn.Module):  # mmdet's: a conv_offset child, but no DCN itself
        def __init__(self):
            super().__init__()
            self.conv_offset = nn.Conv2d(1, 2, 1)
            self.conv_adaption = DeformConv2d()

    assert is_dcn_module(ModulatedDeformConv2dPack()) and is_dcn_module(DeformConv2dPack())
    assert is_dcn_module(DeformConv2d())
    assert not is_dcn_module(FeatureAdaption()) and not is_dcn_module(nn.Conv2d(1, 2, 1))
    assert is_depthwise_conv(nn.Conv2d(4, 8, 3, groups=4))  # mmcv ignores out_channels
    assert is_depthwise_conv(nn.Conv2d(1, 8, 3)) and not is_depthwise_conv(nn.Conv2d(2, 2, 3))
    assert not is_depthwise_conv(nn.Conv1d(2, 2, 3, groups=2))


def test_dcn_offset_lr_mult_reaches_only_a_deformable_convs_offset_conv():
    """mmcv's decision: only the children of a (Modulated)DeformConv2d are "in a DCN"; a
    module that merely owns a conv_offset (mmdet's FeatureAdaption) keeps the bias rules."""

    class FeatureAdaption(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv_offset = nn.Conv2d(2, 4, 1)
            self.conv_adaption = DeformConv2d(2, 2)

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.adapt = FeatureAdaption()
            self.dcn = DeformConv2dPack()

    cfg = dict(bias_lr_mult=2., bias_decay_mult=0.5, dcn_offset_lr_mult=0.1)
    rows = {r['name']: (r['rule'], r['lr'], r['weight_decay'])
            for r in explain_param_groups(Head(), LR, WD, cfg)}
    assert rows == {  # products in mmcv's order, so exact
        'adapt.conv_offset.weight': ('default', LR, WD),
        'adapt.conv_offset.bias': ('bias', 2 * LR, 0.5 * WD),
        'adapt.conv_adaption.weight': ('default', LR, WD),
        'adapt.conv_adaption.bias': ('bias', 2 * LR, 0.5 * WD),
        'dcn.weight': ('default', LR, WD),
        'dcn.bias': ('bias', 2 * LR, 0.5 * WD),
        'dcn.conv_offset.weight': ('dcn_offset', 0.1 * LR, WD),
        'dcn.conv_offset.bias': ('dcn_offset', 0.1 * LR, WD)}


def test_a_paramwise_cfg_that_is_not_a_dict_is_mmcvs_type_error():
    """mmcv 1.7.2's constructor raises TypeError; mtrain's sentence is one too."""
    from mtrain.optim.param_groups import validate_paramwise_cfg
    with pytest.raises(TypeError, match='paramwise_cfg must be a dict or None'):
        validate_paramwise_cfg(['error'])
