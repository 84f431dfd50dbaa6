"""mmcv 1.7.2's initializers (mmcv.cnn.utils.weight_init) through ``initialize``.

Each initializer is checked against the ``torch.nn.init`` call mmcv makes for
it, with the same seed: equal tensors mean the same RNG draws.
"""

import math
import sys

import pytest
import torch
from torch import nn

from mtrain.models import initialize
from mtrain.models.weight_init import bias_init_with_prob, trunc_normal_
from mtrain.registry import INITIALIZERS
from mtrain.runner import save_checkpoint
from mtrain.utils import ConfigError


class FooNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.feat = nn.Conv2d(3, 16, 3)
        self.reg = nn.Conv2d(16, 10, 3)
        self.cls = nn.Linear(16, 5)
        self.norm = nn.BatchNorm2d(16)


def _mmcv_trunc(w, std, bound):
    """mmcv 1.7.2's draw (not current torch's trunc_normal_, which draws otherwise)."""
    cdf = (1. + math.erf(bound / std / math.sqrt(2.))) / 2.
    return w.uniform_(1 - 2 * cdf, 2 * cdf - 1).erfinv_().mul_(std * math.sqrt(2.)).clamp_(
        -bound, bound)


def _drawn(cfg, layer_factory=lambda: nn.Linear(30, 20)):
    torch.manual_seed(0)
    layer = layer_factory()
    torch.manual_seed(1)
    initialize(layer, dict(cfg, layer=type(layer).__name__))
    return layer


@pytest.mark.parametrize('cfg, reference', [
    (dict(type='Normal', mean=0.5, std=0.02), lambda w: nn.init.normal_(w, 0.5, 0.02)),
    (dict(type='Uniform', a=-0.3, b=0.2), lambda w: nn.init.uniform_(w, -0.3, 0.2)),
    (dict(type='Xavier', gain=2), lambda w: nn.init.xavier_normal_(w, gain=2)),
    (dict(type='Xavier', distribution='uniform'), lambda w: nn.init.xavier_uniform_(w)),
    (dict(type='Kaiming'),  # mmcv's defaults: fan_out, relu, normal
     lambda w: nn.init.kaiming_normal_(w, a=0, mode='fan_out', nonlinearity='relu')),
    (dict(type='Kaiming', mode='fan_in', distribution='uniform', a=0.1),
     lambda w: nn.init.kaiming_uniform_(w, a=0.1, mode='fan_in', nonlinearity='relu')),
    (dict(type='Caffe2Xavier'),
     lambda w: nn.init.kaiming_uniform_(w, a=1, mode='fan_in', nonlinearity='leaky_relu')),
    (dict(type='TruncNormal', std=0.02, a=-0.04, b=0.04), lambda w: _mmcv_trunc(w, 0.02, 0.04)),
])
def test_each_initializer_makes_mmcvs_draws(cfg, reference):
    layer = _drawn(dict(cfg, bias=0.25))
    torch.manual_seed(0)
    expected = nn.Linear(30, 20)
    torch.manual_seed(1)
    reference(expected.weight.data)
    assert torch.equal(layer.weight, expected.weight)
    assert torch.all(layer.bias == 0.25)


def test_trunc_normal_stays_in_bounds_with_the_asked_moments():
    torch.manual_seed(0)
    w = trunc_normal_(torch.empty(200_000), mean=1.0, std=0.5, a=0.0, b=2.0)
    assert w.min() >= 0.0 and w.max() <= 2.0
    assert abs(w.mean().item() - 1.0) < 0.01
    # a N(1, 0.5) cut at ±2 std keeps ~0.88 of the std
    assert abs(w.std().item() - 0.5 * 0.8796) < 0.01


def test_layer_matches_class_and_direct_base_names_only():
    net = FooNet()
    initialize(net, dict(type='Constant', val=4, bias=1, layer=['_BatchNorm', 'Linear']))
    assert torch.all(net.norm.weight == 4) and torch.all(net.norm.bias == 1)  # BatchNorm2d's base
    assert torch.all(net.cls.weight == 4)
    assert not torch.all(net.feat.weight == 4)


def test_override_initialises_the_named_child_as_a_whole():
    net = FooNet()
    initialize(net, dict(type='Constant', val=1, bias=2, layer='Conv2d',
                         override=dict(type='Constant', name='reg', val=3, bias=4)))
    assert torch.all(net.feat.weight == 1) and torch.all(net.feat.bias == 2)
    assert torch.all(net.reg.weight == 3) and torch.all(net.reg.bias == 4)


def test_override_with_only_a_name_reuses_the_rules_arguments():
    net = FooNet()
    initialize(net, dict(type='Constant', val=5, bias=6, layer='Conv2d', override=dict(name='cls')))
    assert torch.all(net.cls.weight == 5) and torch.all(net.cls.bias == 6)  # though a Linear


def test_bias_prob_sets_the_focal_loss_prior():
    layer = _drawn(dict(type='Normal', std=0.01, bias_prob=0.01))
    assert torch.allclose(layer.bias, torch.full((20, ), bias_init_with_prob(0.01)))
    assert bias_init_with_prob(0.01) == pytest.approx(-4.59512, abs=1e-5)


def test_rules_apply_in_order_and_a_shared_cfg_is_not_consumed():
    net = FooNet()
    cfg = [dict(type='Constant', val=1, layer='Conv2d'),
           dict(type='Constant', val=2, layer='Conv2d', override=dict(name='reg', val=7,
                                                                       type='Constant'))]
    initialize(net, cfg)
    assert torch.all(net.feat.weight == 2) and torch.all(net.reg.weight == 7)
    assert 'override' in cfg[1] and cfg[1]['override']['name'] == 'reg'  # deep-copied


def test_pretrained_loads_all_or_a_prefix(tmp_path):
    src = FooNet()
    with torch.no_grad():
        src.cls.weight.fill_(0.75)
    save_checkpoint(src, str(tmp_path / 'foo.pth'))
    whole = FooNet()
    initialize(whole, dict(type='Pretrained', checkpoint=str(tmp_path / 'foo.pth'),
                           map_location='cpu'))
    assert torch.equal(whole.feat.weight, src.feat.weight) and torch.all(whole.cls.weight == 0.75)
    head = nn.Linear(16, 5)
    initialize(head, dict(type='Pretrained', checkpoint=str(tmp_path / 'foo.pth'), prefix='cls.'))
    assert torch.all(head.weight == 0.75) and torch.equal(head.bias, src.cls.bias)


@pytest.mark.parametrize('cfg, error, match', [
    (dict(type='Constant', val=1, bias='1'), TypeError, 'bias must be a number'),
    (dict(type='Constant', val=1, bias_prob=1), TypeError, 'bias_prob type must be float'),
    (dict(type='Constant', val=1, layer=3), TypeError, 'layer must be a str'),
    (dict(type='Constant', val=1, override=dict(val=2)), ValueError, 'must contain the key "name"'),
    (dict(type='Constant', val=1, override=dict(name='reg', val=2)), ValueError, 'need "type"'),
    (dict(type='Constant', val=1, override=dict(name='nope', type='Constant', val=2)),
     RuntimeError, 'module did not have attribute nope'),
    (dict(type='Constant', val=1, override='reg'), TypeError, 'override must be a dict'),
    ('Constant', TypeError, 'init_cfg must be a dict or a list of dict'),
])
def test_bad_rules_raise_mmcvs_exceptions(cfg, error, match):
    with pytest.raises(error, match=match):
        initialize(FooNet(), cfg)


def test_unknown_initializer_names_the_closest():
    with pytest.raises(ConfigError, match='Kaiming'):
        initialize(FooNet(), dict(type='Kaimnig'))


def test_own_initializer_registered_by_name():
    @INITIALIZERS.register_module(name='test_Ones', force=True)
    class Ones:
        def __init__(self, **kwargs):
            self.wholemodule = False

        def __call__(self, module):
            for p in module.parameters():
                nn.init.ones_(p)

    net = FooNet()
    initialize(net, dict(type='test_Ones'))
    assert all(torch.all(p == 1) for p in net.parameters())


def test_an_initializer_registered_in_mmcvs_own_registry_is_found(monkeypatch):
    """A 1.x codebase registers its initializers in mmcv.cnn's INITIALIZERS (when mmcv is loaded)."""
    import types

    from mmengine.registry import Registry
    mmcv_initializers = Registry('mmcv initializer')

    @mmcv_initializers.register_module(name='test_Twos')
    class Twos:
        def __call__(self, module):
            for p in module.parameters():
                nn.init.constant_(p, 2.0)

    fake = types.ModuleType('mmcv.cnn.utils.weight_init')
    fake.INITIALIZERS = mmcv_initializers
    monkeypatch.setitem(sys.modules, 'mmcv.cnn.utils.weight_init', fake)
    net = FooNet()
    initialize(net, dict(type='test_Twos'))
    assert all(torch.all(p == 2) for p in net.parameters())
