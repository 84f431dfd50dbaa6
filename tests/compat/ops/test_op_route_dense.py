"""mmcv 1.7.2's own wrappers of deform_conv, modulated_deform_conv, ms_deform_attn, carafe,
masked_conv and MMSyncBN run on mtrain's ``mmcv._ext`` through the import route.

The children (route_dense_child.py; route_syncbn_child.py, one per rank) run in a
Python with pure-Python mmcv 1.7.2 (tests/mmcv_python.py says where it is looked for;
skipped otherwise).
"""

import json
import os.path as osp
import socket
import subprocess

import pytest

import mmcv_python  # tests/mmcv_python.py

pytestmark = pytest.mark.slow
HERE = osp.dirname(osp.abspath(__file__))
REPO = osp.dirname(osp.dirname(osp.dirname(HERE)))


ENV = {'PYTHONPATH': REPO, 'PATH': ''}


def _python() -> str:
    return mmcv_python.find('import mmcv; print(mmcv.__version__)', ['1.7.2'],
                            'mmcv 1.7.2 (MMCV_WITH_OPS=0)')


def _last_json(proc: subprocess.Popen) -> dict:
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr[-3000:]
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.fixture(scope='module')
def measured():
    child = osp.join(HERE, 'route_dense_child.py')
    return _last_json(subprocess.Popen([_python(), child], stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True, env=ENV))


def _sync_bn(world: int) -> list:
    """Each rank's differences from BatchNorm2d over the whole batch (route_syncbn_child.py)."""
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    child = osp.join(HERE, 'route_syncbn_child.py')
    procs = [subprocess.Popen([_python(), child, str(port), str(rank), str(world)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=ENV) for rank in range(world)]
    return [_last_json(p) for p in procs]


def test_dcn_functions_pass_gradcheck_and_packs_train(measured):
    assert measured['dcn_gradcheck'] and measured['mdcn_gradcheck']
    assert measured['mdcn_pack_shape'] == [2, 8, 9, 9]
    assert measured['dcn_pack_shape'] == [3, 8, 9, 9]
    assert measured['mdcn_offset_grad_nonzero']


def test_ms_deform_attn_equals_mmcvs_pytorch_reference(measured):
    # float64; the two sum the same products in a different order.
    assert measured['msda_forward_max_abs'] < 1e-14
    assert measured['msda_grad_max_abs'] < 1e-14


def test_carafe_and_masked_conv(measured):
    assert measured['carafe_equals_naive']
    assert measured['carafe_pack_shape'] == [2, 8, 10, 8]
    assert measured['masked_conv_max_abs'] == 0.0


def test_mmsyncbn_is_batch_norm_over_all_ranks():
    """Two gloo processes: batch norm over both halves. (One process, plain batch norm, is
    tests/compat/ops/test_op_sync_bn.py's; a third fresh interpreter here cost 10 s.)"""
    for rank in _sync_bn(2):
        assert max(rank.values()) < 1e-5, rank


def test_every_entry_point_was_served_by_mtrain(measured):
    served = dict(line.split(' -> ') for line in measured['served'])
    assert len(served) == 11
    assert all(impl.startswith('mtrain.compat.ops.') for impl in served.values())
