"""mmcv 1.7.2's own wrappers of deform_conv, modulated_deform_conv, ms_deform_attn, carafe,
masked_conv and MMSyncBN run on mtrain's ``mmcv._ext`` through the import route.

The child (route_dense_child.py) runs in a Python with pure-Python mmcv
1.7.2 (tests/mmcv_python.py says where it is looked for; skipped otherwise).
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


@pytest.fixture(scope='module')
def measured():
    python = mmcv_python.find('import mmcv; print(mmcv.__version__)', ['1.7.2'],
                              'mmcv 1.7.2 (MMCV_WITH_OPS=0)')
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    out = subprocess.run([python, osp.join(HERE, 'route_dense_child.py'), str(port)],
                         capture_output=True, text=True, env={'PYTHONPATH': REPO, 'PATH': ''},
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_dcn_functions_pass_gradcheck_and_packs_train(measured):
    assert measured['dcn_gradcheck'] and measured['mdcn_gradcheck']
    assert measured['mdcn_pack_shape'] == [2, 8, 9, 9]
    assert measured['dcn_pack_shape'] == [3, 8, 9, 9]
    assert measured['mdcn_offset_grad_nonzero']


def test_ms_deform_attn_equals_mmcvs_pytorch_reference(measured):
    # float64; the two sum the same products in a different order.
    assert measured['msda_forward_max_abs'] < 1e-14
    assert measured['msda_grad_max_abs'] < 1e-14


def test_carafe_masked_conv_and_sync_bn(measured):
    assert measured['carafe_equals_naive']
    assert measured['carafe_pack_shape'] == [2, 8, 10, 8]
    assert measured['masked_conv_max_abs'] == 0.0
    # One process: mmcv's SyncBatchNorm is nn.BatchNorm2d (outputs, grads, running stats).
    assert measured['syncbn_max_abs'] < 1e-5


def test_every_entry_point_was_served_by_mtrain(measured):
    served = dict(line.split(' -> ') for line in measured['served'])
    assert len(served) == 16
    assert all(impl.startswith('mtrain.compat.ops.') for impl in served.values())
