"""mmcv 1.7.2's own ``mmcv.ops`` wrappers on mtrain's ``mmcv._ext``, through the import route.

Runs in a Python with pure-Python mmcv 1.7.2 (tests/mmcv_python.py finds it;
skipped otherwise): ``batched_nms`` (offsets, ``split_thr``, ``soft_nms`` by
name), ``RoIAlign``, the focal losses, ``--list-ops``, the one-line error of
an op mtrain lacks, and ``dcn_offset_lr_mult`` on both optimizer constructors.
"""

import os
import os.path as osp
import subprocess
import textwrap

import pytest

import mmcv_python  # tests/mmcv_python.py

REPO = osp.dirname(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

WRAPPERS = '''
import torch
from mmcv.ops import (RoIAlign, batched_nms, nms, nms_match, roi_pool, sigmoid_focal_loss,
                      soft_nms, softmax_focal_loss)
g = torch.Generator().manual_seed(0)
xy = torch.rand(300, 2, generator=g) * 60
boxes = torch.cat([xy, xy + torch.rand(300, 2, generator=g) * 25], 1)
scores, idxs = torch.rand(300, generator=g), torch.randint(0, 4, (300, ), generator=g)
dets, keep = batched_nms(boxes, scores, idxs, dict(type='nms', iou_threshold=0.5))
split, split_keep = batched_nms(boxes, scores, idxs, dict(type='nms', iou_threshold=0.5,
                                                          split_thr=10))
assert torch.equal(keep, split_keep) and torch.equal(dets, split)
by_class = torch.cat([(idxs == c).nonzero()[:, 0][nms(boxes[idxs == c], scores[idxs == c],
                                                      0.5)[1]] for c in range(4)])
assert sorted(keep.tolist()) == sorted(by_class.tolist())
soft, soft_keep = batched_nms(boxes, scores, idxs, dict(type='soft_nms', iou_threshold=0.5))
assert len(soft_keep) >= len(keep) and (soft[:, 4][1:] <= soft[:, 4][:-1]).all()
groups = nms_match(torch.cat([boxes, scores[:, None]], 1), 0.5)
assert sum(len(g) for g in groups) == 300
feat = torch.randn(2, 8, 32, 32, requires_grad=True)
rois = torch.cat([idxs[:40, None].float() % 2, boxes[:40]], 1)
for aligned in (True, False):
    out = RoIAlign((7, 7), 0.5, 0, aligned=aligned)(feat, rois)
    out.sum().backward()
assert out.shape == (40, 8, 7, 7) and feat.grad.abs().sum() > 0
roi_pool(feat, rois, (7, 7), 0.5).sum().backward()
logits = torch.randn(50, 5, requires_grad=True)
labels = torch.randint(0, 5, (50, ))
(sigmoid_focal_loss(logits, labels, 2.0, 0.25) +
 softmax_focal_loss(logits, labels, 2.0, 0.25)).backward()
print('WRAPPERS OK')
'''

DCN = '''
import sys
import torch
from mmcv.ops import DeformConv2dPack
from mmcv.runner import DefaultOptimizerConstructor
model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), DeformConv2dPack(8, 8, 3, padding=1))
optimizer = DefaultOptimizerConstructor(dict(type='SGD', lr=0.1, momentum=0.9),
                                        dict(dcn_offset_lr_mult=0.5))(model)
lrs = {id(p): g['lr'] for g in optimizer.param_groups for p in g['params']}
offsets = [lrs[id(p)] for p in model[1].conv_offset.parameters()]
print('OFFSET LR', offsets, 'WEIGHT LR', lrs[id(model[1].weight)], type(optimizer).__module__)
'''


def _python() -> str:
    return mmcv_python.find('import mmcv; print(mmcv.__version__)', ['1.7.2'],
                            'mmcv 1.7.2 (MMCV_WITH_OPS=0)')


def _run(tmp_path, code, *flags):
    script = tmp_path / 'script.py'
    script.write_text(textwrap.dedent(code))
    env = dict(os.environ, PYTHONPATH=REPO)
    return subprocess.run([_python(), '-m', 'mtrain.compat.run', *flags, str(script)],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path))


@pytest.fixture(scope='module')
def routed(tmp_path_factory):
    """One routed run: the wrappers, the DCN constructor, then an op mtrain lacks (exit 1)."""
    missing = """
from mmcv.ops import nms_quadri
nms_quadri(torch.rand(3, 8), torch.rand(3), 0.5)
"""
    return _run(tmp_path_factory.mktemp('routed'), WRAPPERS + DCN + missing, '--list-ops')


@pytest.mark.slow
def test_mmcvs_own_wrappers_run_on_mtrains_ops_and_list_them(routed):
    assert 'WRAPPERS OK' in routed.stdout, routed.stderr[-3000:]
    listed = routed.stdout.split('mmcv ops called:')[1].split()
    for op, module in [('nms', 'nms.nms'), ('softnms', 'soft_nms.softnms'),
                       ('nms_match', 'nms.nms_match'),
                       ('roi_align_forward', 'roi_align.roi_align_forward'),
                       ('roi_align_backward', 'roi_align.roi_align_backward'),
                       ('roi_pool_backward', 'roi_pool.roi_pool_backward'),
                       ('sigmoid_focal_loss_backward', 'focal_loss.sigmoid_focal_loss_backward'),
                       ('softmax_focal_loss_forward', 'focal_loss.softmax_focal_loss_forward')]:
        assert listed[listed.index(op) + 2] == 'mtrain.compat.ops.' + module


@pytest.mark.slow
def test_an_op_mtrain_lacks_ends_the_run_with_one_line(routed):
    assert routed.returncode == 1
    assert 'Traceback' not in routed.stderr
    assert routed.stderr.strip().splitlines()[-1].startswith(
        "error: mmcv op 'nms_quadri' (called from mmcv.ops.nms) has no implementation")
    assert 'nms_quadri -> not implemented' in routed.stdout


def _offset_lrs(stdout: str):
    line = stdout.split('OFFSET LR')[1].splitlines()[0]
    return line.split('WEIGHT LR')[0].strip(), line.split()[-2], line.split()[-1]


@pytest.mark.slow
def test_dcn_offset_layers_get_their_lr_mult_through_the_route(routed):
    """mtrain's constructor (what mmcv.runner is under the route) finds the DCN layer."""
    assert _offset_lrs(routed.stdout) == ('[0.05, 0.05]', '0.1', 'torch.optim.sgd')


@pytest.mark.slow
def test_dcn_offset_layers_get_their_lr_mult_on_mmcvs_constructor(tmp_path):
    """mmcv's own constructor applies dcn_offset_lr_mult only if check_ops_exist() finds an
    ``mmcv._ext``: the one the route serves counts."""
    done = _run(tmp_path, DCN, '--mmcv-runner')
    assert done.returncode == 0, done.stderr[-3000:]
    assert _offset_lrs(done.stdout) == ('[0.05, 0.05]', '0.1', 'torch.optim.sgd')
