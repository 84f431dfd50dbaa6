"""The ``mmcv._ext`` module: the merged table, recording what served each op, the one-line gap."""

import pytest
import torch

from mtrain.compat import ops
from mtrain.compat.ops import ext


def test_table_merges_every_listed_module_once():
    table = ops.entry_points()
    for name in ('nms', 'softnms', 'nms_match', 'roi_align_forward', 'roi_align_backward',
                 'sigmoid_focal_loss_forward', 'softmax_focal_loss_backward',
                 'roi_pool_forward', 'deform_roi_pool_backward'):
        assert callable(table[name]), name
    assert table['nms'].__module__ == 'mtrain.compat.ops.nms'


def test_an_implemented_op_is_recorded_at_its_first_call_then_served_directly(monkeypatch):
    monkeypatch.setattr(ext, 'served', {})
    module = ext.ExtModule('mmcv._ext')
    first = module.nms
    assert first is not ops.entry_points()['nms'] and ext.served == {}  # lookup records nothing
    keep = first(torch.tensor([[0., 0., 2., 2.]]), torch.tensor([1.]), iou_threshold=0.5,
                 offset=0)
    assert keep.tolist() == [0]
    assert ext.served == {'nms': 'mtrain.compat.ops.nms.nms'}
    assert module.nms is ops.entry_points()['nms']  # no wrapper on later calls
    assert ext.report() == ['nms -> mtrain.compat.ops.nms.nms']


def test_a_missing_op_resolves_and_raises_one_line_at_its_call(monkeypatch):
    monkeypatch.setattr(ext, 'served', {})
    module = ext.ExtModule('mmcv._ext')
    assert hasattr(module, 'nms_quadri')  # what mmcv's load_ext asserts at import
    with pytest.raises(ext.MissingOpError) as error:
        module.nms_quadri(torch.zeros(1, 5))
    message = str(error.value)
    assert '\n' not in message
    assert "mmcv op 'nms_quadri' (called from " + __name__ + ')' in message
    assert 'mtrain/compat/ops' in message and 'mmcv-full' in message
    assert isinstance(error.value, RuntimeError)  # what mmcv-era code catches
    assert ext.served == {'nms_quadri': ext.NOT_IMPLEMENTED}
    assert module.get_compiler_version() == 'n/a'
    with pytest.raises(AttributeError):
        module.__wrapped__
