"""DefaultOptimizerConstructor, build_optimizer and the OPTIMIZERS registry."""

import copy
import inspect
import logging
import os
import textwrap

import pytest
import torch
from mmengine.config import ConfigDict
from torch import nn

from mtrain.config import load_config
from mtrain.optim import (TORCH_OPTIMIZERS, DefaultOptimizerConstructor, build_optimizer,
                          build_optimizer_constructor, get_param_groups)
from mtrain.parallel import ModelWrapper
from mtrain.registry import OPTIMIZER_CONSTRUCTORS, OPTIMIZERS
from mtrain.utils import ConfigError

SGD_CFG = dict(type='SGD', lr=0.01, momentum=0.9, weight_decay=1e-4)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4))
        self.head = nn.Linear(4, 2)


class Shared(Net):
    def __init__(self) -> None:
        super().__init__()
        self.neck = nn.Sequential(self.head)


@pytest.fixture
def mtrain_log(caplog):
    """Records of the ``mtrain.optim`` loggers (the mtrain logger may not propagate)."""
    log = logging.getLogger('mtrain.optim')
    log.addHandler(caplog.handler)
    caplog.handler.setLevel(logging.INFO)
    old_level = log.level
    log.setLevel(logging.INFO)
    yield caplog
    log.setLevel(old_level)
    log.removeHandler(caplog.handler)


def test_every_torch_optimizer_is_registered():
    expected = {name for name, obj in vars(torch.optim).items()
                if inspect.isclass(obj) and issubclass(obj, torch.optim.Optimizer)
                and obj is not torch.optim.Optimizer}
    assert expected <= set(TORCH_OPTIMIZERS)
    assert {'SGD', 'Adam', 'AdamW', 'RMSprop'} <= expected
    for name in expected:
        assert OPTIMIZERS.get(name) is getattr(torch.optim, name)


def test_without_paramwise_cfg_one_group_holds_every_parameter(mtrain_log):
    model = Net()
    optimizer = build_optimizer(model, SGD_CFG)
    assert isinstance(optimizer, torch.optim.SGD) and len(optimizer.param_groups) == 1
    group = optimizer.param_groups[0]
    assert group['params'] == list(model.parameters())
    assert (group['lr'], group['momentum'], group['weight_decay']) == (0.01, 0.9, 1e-4)
    assert 'optimizer SGD: 1 param group for 6 parameter tensors' in mtrain_log.text


def test_paramwise_groups_reach_the_optimizer(mtrain_log):
    model = Net()
    paramwise_cfg = dict(norm_decay_mult=0., custom_keys={'head': dict(lr_mult=10.)})
    optimizer = build_optimizer(model, dict(SGD_CFG, paramwise_cfg=paramwise_cfg))
    per_param = get_param_groups(model, 0.01, 1e-4, paramwise_cfg, merge=False)
    assert len(per_param) == 6  # mmcv's layout; the optimizer gets one group per setting
    groups = optimizer.param_groups
    assert [[p.shape for p in g['params']] for g in groups] == [
        [(4, 3, 1, 1), (4,)], [(4,), (4,)], [(2, 4), (2,)]]  # conv, bn, head: mmcv's order
    assert [(g['lr'], g['weight_decay'], g['momentum']) for g in groups] == [
        (0.01, 1e-4, 0.9), (0.01, 0., 0.9), (0.01 * 10., 1e-4, 0.9)]
    group_of = {id(p): g for g in groups for p in g['params']}
    for want in per_param:
        got = group_of[id(want['params'][0])]
        assert got['lr'] == want.get('lr', 0.01)
        assert got['weight_decay'] == want.get('weight_decay', 1e-4)
    assert ('optimizer SGD: 3 param groups for 6 parameter tensors (lr=0.01, '
            'weight_decay=0.0001); lr scaled for 2, weight decay scaled for 2.') in mtrain_log.text


def test_a_wrapper_is_unwrapped_but_a_submodule_called_module_is_not():
    model = Net()
    cfg = dict(SGD_CFG, paramwise_cfg=dict(custom_keys={'backbone': dict(lr_mult=0.)}))
    optimizer = build_optimizer(nn.DataParallel(model), cfg)
    assert optimizer.param_groups[0]['lr'] == 0.
    assert optimizer.param_groups[0]['params'] == list(model.backbone.parameters())

    class HasModule(nn.Module):
        def __init__(self):
            super().__init__()
            self.module = nn.Linear(2, 2)
            self.extra = nn.Linear(2, 2)

    # mmcv would optimize only `.module` here, silently dropping `extra`.
    optimizer = build_optimizer(HasModule(), SGD_CFG)
    assert len(optimizer.param_groups[0]['params']) == 4


def test_build_optimizer_does_not_mutate_its_input():
    cfg = ConfigDict(dict(SGD_CFG, constructor='DefaultOptimizerConstructor',
                          paramwise_cfg=dict(custom_keys={'head': dict(lr_mult=2.)})))
    before = copy.deepcopy(cfg)
    build_optimizer(Net(), cfg)
    assert cfg == before and 'constructor' in cfg and 'paramwise_cfg' in cfg


def test_duplicates_need_bypass_duplicate():
    with pytest.raises(ConfigError, match='bypass_duplicate=True') as err:
        build_optimizer(Shared(), dict(SGD_CFG, paramwise_cfg=dict(bias_lr_mult=2.)))
    assert "'neck.0.weight' is the same parameter as 'head.weight'" in str(err.value)
    optimizer = build_optimizer(Shared(), dict(
        SGD_CFG, paramwise_cfg=dict(bias_lr_mult=2., bypass_duplicate=True)))
    assert sum(len(g['params']) for g in optimizer.param_groups) == 6


@pytest.mark.parametrize('cfg, key, hint', [
    (dict(SGD_CFG, lr=-0.1), 'optimizer.lr', '>= 0'),
    (dict(SGD_CFG, weight_decay=-1e-4), 'optimizer.weight_decay', '>= 0'),
    (dict(SGD_CFG, type='SDG'), 'optimizer.type', "'SGD'"),
    (dict(SGD_CFG, momentun=0.9), 'optimizer.momentun', "'momentum'"),
    (dict(SGD_CFG, constructor='DefaultOptimiserConstructor'), 'optimizer.constructor',
     "'DefaultOptimizerConstructor'"),
    (dict(SGD_CFG, paramwise_cfg=dict(bias_lr_multi=2.)), 'optimizer.paramwise_cfg.bias_lr_multi',
     "'bias_lr_mult'"),
])
def test_config_errors_name_the_key(cfg, key, hint):
    with pytest.raises(ConfigError) as err:
        build_optimizer(Net(), cfg)
    assert err.value.key == key and hint in str(err.value)


def test_paramwise_cfg_is_checked_before_a_model_exists():
    with pytest.raises(ConfigError, match='optimizer.weight_decay is not set'):
        DefaultOptimizerConstructor(dict(type='SGD', lr=0.1), dict(bias_decay_mult=0.))


def test_a_users_constructor_is_built_by_name():
    @OPTIMIZER_CONSTRUCTORS.register_module()
    class HeadOnlyConstructor:
        def __init__(self, optimizer_cfg, paramwise_cfg=None):
            self.optimizer_cfg, self.paramwise_cfg = optimizer_cfg, paramwise_cfg

        def __call__(self, model):
            return torch.optim.SGD(model.head.parameters(), lr=self.optimizer_cfg['lr'])

    try:
        cfg = dict(SGD_CFG, constructor='HeadOnlyConstructor', paramwise_cfg=dict(x=1))
        optimizer = build_optimizer(Net(), cfg)
        assert len(optimizer.param_groups[0]['params']) == 2
        constructor = build_optimizer_constructor(dict(
            type='HeadOnlyConstructor', optimizer_cfg=dict(lr=0.5), paramwise_cfg=None))
        assert constructor.optimizer_cfg == dict(lr=0.5)
    finally:
        OPTIMIZER_CONSTRUCTORS.module_dict.pop('HeadOnlyConstructor')


def test_a_users_optimizer_via_custom_imports(tmp_path, monkeypatch):
    (tmp_path / 'mtrain_test_user_optim.py').write_text(textwrap.dedent('''
        import torch
        from mtrain.registry import OPTIMIZERS

        @OPTIMIZERS.register_module()
        class UserSignSGD(torch.optim.Optimizer):
            def __init__(self, params, lr):  # no default: lr is required
                super().__init__(params, dict(lr=lr))
    '''))
    (tmp_path / 'cfg.py').write_text(
        "custom_imports = dict(imports=['mtrain_test_user_optim'])\n"
        "optimizer = dict(type='UserSignSGD', lr=0.05,\n"
        "                 paramwise_cfg=dict(custom_keys={'head': dict(lr_mult=0.1)}))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        cfg = load_config(str(tmp_path / 'cfg.py'))
        optimizer = build_optimizer(Net(), cfg.optimizer)
        assert type(optimizer).__name__ == 'UserSignSGD'
        assert [g['lr'] for g in optimizer.param_groups] == pytest.approx([0.05, 0.005])
        assert [len(g['params']) for g in optimizer.param_groups] == [4, 2]
        with pytest.raises(ConfigError, match="missing 1 required positional argument: 'lr'"):
            build_optimizer(Net(), dict(type='UserSignSGD'))
    finally:
        OPTIMIZERS.module_dict.pop('UserSignSGD', None)


def _doc_block(path, heading):
    """The first ```python block after ``heading`` in a docs page."""
    text = open(path).read()
    after = text[text.index(heading):]
    start = after.index('```python\n') + len('```python\n')
    return after[start:after.index('```', start)]


REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_documented_layer_decay_constructor_runs_verbatim():
    """docs/optimizer.md's example gets the user's model, not the wrapper around it."""
    code = _doc_block(os.path.join(REPO_ROOT, 'docs', 'optimizer.md'), '## Your own constructor')
    namespace = {}
    try:
        exec(compile(code, 'docs/optimizer.md', 'exec'), namespace)

        class Layered(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2), nn.Linear(2, 2))

        model = Layered()
        optimizer = build_optimizer(ModelWrapper(model), namespace['optimizer'])
        assert type(optimizer).__name__ == 'AdamW'
        assert [g['lr'] for g in optimizer.param_groups] == pytest.approx(
            [1e-3 * 0.75 ** 2, 1e-3 * 0.75, 1e-3])
        assert optimizer.param_groups[0]['params'] == list(model.layers[0].parameters())
    finally:
        OPTIMIZER_CONSTRUCTORS.module_dict.pop('LayerDecayConstructor', None)
