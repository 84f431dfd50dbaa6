"""BaseModule & co. (mmcv.runner.base_module): init_cfg, init_weights order, the init-info log.

Expected values are mmcv 1.7.2's, from reading its code: ``initialize`` runs
each rule through ``module.apply`` (children before parents), a parent's rules
before its children's ``init_weights``, in registration order; so the same
seed gives the same draws, checked here against the bare ``torch.nn.init``
calls in that order (and against mmcv itself in test_mmcv_reference.py).
"""

import logging
import sys
import warnings
from abc import abstractmethod

import pytest
import torch
from torch import nn

from mtrain.models import BaseModule, ModuleDict, ModuleList, Sequential
from mtrain.runner import save_checkpoint


class Block(BaseModule):
    def __init__(self, init_cfg=None):
        super().__init__(init_cfg)
        self.conv = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4, 2)


class Net(BaseModule):
    def __init__(self, init_cfg=None, block_cfg=None):
        super().__init__(init_cfg)
        self.stem = nn.Conv2d(3, 3, 1)
        self.block = Block(block_cfg)
        self.head = nn.Linear(2, 2)


def test_rules_apply_parent_first_children_after_with_mmcvs_draws():
    torch.manual_seed(3)
    net = Net(init_cfg=[dict(type='Kaiming', layer='Conv2d'),
                        dict(type='Normal', std=0.01, layer='Linear')],
              block_cfg=dict(type='Xavier', layer='Conv2d', distribution='uniform'))
    torch.manual_seed(11)
    net.init_weights()

    torch.manual_seed(3)
    ref = Net()
    torch.manual_seed(11)
    # the parent's Kaiming rule, then its Normal rule: apply() walks the tree depth first
    for conv in (ref.stem, ref.block.conv):
        nn.init.kaiming_normal_(conv.weight, mode='fan_out', nonlinearity='relu')
        nn.init.zeros_(conv.bias)
    for fc in (ref.block.fc, ref.head):
        nn.init.normal_(fc.weight, 0, 0.01)
        nn.init.zeros_(fc.bias)
    # then the child's own rule, overwriting its conv
    nn.init.xavier_uniform_(ref.block.conv.weight)
    nn.init.zeros_(ref.block.conv.bias)
    for name, value in ref.state_dict().items():
        assert torch.equal(net.state_dict()[name], value), name
    assert net.is_init and net.block.is_init
    assert not any(hasattr(m, '_params_init_info') for m in net.modules())


def test_second_call_only_warns_and_changes_nothing():
    net = Net(init_cfg=dict(type='Normal', layer='Linear'))
    net.init_weights()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    with pytest.warns(UserWarning, match='init_weights of Net has been called more than once'):
        net.init_weights()
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())


def test_pretrained_parent_keeps_children_from_reinitialising(tmp_path):
    source = Net()
    with torch.no_grad():
        for p in source.parameters():
            p.fill_(0.5)
    save_checkpoint(source, str(tmp_path / 'src.pth'))
    net = Net(init_cfg=dict(type='Pretrained', checkpoint=str(tmp_path / 'src.pth')),
              block_cfg=dict(type='Constant', val=9, layer='Linear'))
    net.init_weights()
    assert all(torch.all(p == 0.5) for p in net.parameters())  # the child's Constant never ran
    assert not net.is_init  # mmcv returns before marking it


def test_user_defined_init_weights_of_a_plain_child_is_called_and_logged(tmp_path):
    calls = []

    class Plain(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.zeros(3))

        def init_weights(self):
            calls.append('plain')
            nn.init.constant_(self.w, 2.0)

    class Top(BaseModule):
        def __init__(self):
            super().__init__()
            self.plain = Plain()
            self.untouched = nn.Linear(2, 2)

    log_file = tmp_path / 'init.log'
    logger = logging.getLogger('mtrain')
    handler = logging.FileHandler(log_file)
    logger.addHandler(handler)
    try:
        Top().init_weights()
    finally:
        logger.removeHandler(handler)
        handler.close()
    assert calls == ['plain']
    text = log_file.read_text()  # (mmcv's text: the info ends in a space, then ' \n')
    assert text.startswith('Name of parameter - Initialization information\n')
    assert ('\nplain.w - torch.Size([3]): \nInitialized by user-defined `init_weights` in Plain  \n'
            in text)
    assert ('\nuntouched.weight - torch.Size([2, 2]): \nThe value is the same before and after '
            'calling `init_weights` of Top  \n' in text)


def test_init_info_names_the_rule_that_last_changed_each_parameter(tmp_path):
    log_file = tmp_path / 'init.log'
    logger = logging.getLogger('mtrain')
    handler = logging.FileHandler(log_file)
    logger.addHandler(handler)
    try:
        Net(init_cfg=dict(type='Constant', val=1, bias=2, layer='Linear',
                          override=dict(name='head', type='Constant', val=3))).init_weights()
    finally:
        logger.removeHandler(handler)
        handler.close()
    text = log_file.read_text()
    assert '\nhead.weight - torch.Size([2, 2]): \nConstantInit: val=3, bias=0 \n' in text
    assert '\nblock.fc.bias - torch.Size([2]): \nConstantInit: val=1, bias=2 \n' in text


def test_containers_take_init_cfg():
    seq = Sequential(nn.Linear(2, 2), nn.Linear(2, 2), init_cfg=dict(type='Constant', val=1,
                                                                     layer='Linear'))
    lst = ModuleList([nn.Linear(2, 2)], init_cfg=dict(type='Constant', val=2, layer='Linear'))
    dct = ModuleDict({'a': nn.Linear(2, 2)}, init_cfg=dict(type='Constant', val=3, layer='Linear'))
    for module, val in ((seq, 1), (lst, 2), (dct, 3)):
        module.init_weights()
        assert all(torch.all(m.weight == val) for m in module.modules() if isinstance(m, nn.Linear))
    assert len(seq) == 2 and isinstance(lst[0], nn.Linear) and 'a' in dct
    assert repr(seq).endswith("init_cfg={'type': 'Constant', 'val': 1, 'layer': 'Linear'}")


def test_init_cfg_is_copied_and_abstract_methods_are_enforced():
    cfg = dict(type='Constant', val=1, layer='Linear')
    block = Block(cfg)
    cfg['val'] = 5
    assert block.init_cfg['val'] == 1

    class Abstract(BaseModule):
        @abstractmethod
        def extract_feat(self):
            pass

    with pytest.raises(TypeError, match='abstract'):
        Abstract()


def test_no_warning_on_first_call():
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        Net().init_weights()


def test_init_log_goes_to_the_first_logger_get_logger_set_up(tmp_path, monkeypatch):
    """mmcv's rule: a 1.x codebase's root logger (made first) gets the init log in its file."""
    import types
    fake = types.ModuleType('mmcv.utils.logging')
    fake.logger_initialized = {'codebase_root': True}
    monkeypatch.setitem(sys.modules, 'mmcv.utils.logging', fake)
    codebase = logging.getLogger('codebase_root')
    handler = logging.FileHandler(tmp_path / 'run.log')
    codebase.addHandler(handler)
    try:
        Net(init_cfg=dict(type='Constant', val=1, layer='Linear')).init_weights()
    finally:
        codebase.removeHandler(handler)
        handler.close()
    text = (tmp_path / 'run.log').read_text()
    assert 'head.weight - torch.Size([2, 2]): \nConstantInit: val=1, bias=0' in text
