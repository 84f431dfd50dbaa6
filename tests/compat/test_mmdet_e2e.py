"""Unmodified mmdetection 2.28.2 trains, resumes and tests through the route on mtrain's mmcv ops.

mmdet's own ``tools/train.py`` and ``tools/test.py`` (shipped in its wheel
under ``.mim``) run through ``python -m mtrain.compat.run --list-ops`` on tiny
COCO-format data (``mmdet_e2e_setup.py``: boxes and polygons, 2 classes) with
RetinaNet, Faster R-CNN, Mask R-CNN, FCOS and a Faster R-CNN with DCNv2 in
ResNet stages 2-4. Checked for each: the ops the run called and that mtrain's
``mmcv._ext`` served them (``nms`` in every test pass, ``roi_align`` forward
and backward in the two-stage heads and Mask R-CNN's mask targets,
``modulated_deform_conv`` in the DCN backbone); finite losses, lower in the
second epoch than in the first (true for seeds 0-3 of every detector);
the checkpoints and an evaluation (pycocotools) per epoch. Faster R-CNN
(``RESUMED``) also resumes from ``epoch_1.pth`` to the uninterrupted run's
second epoch bit for bit (losses, lr, evaluation, final weights: the resume is the
runner's, the same for every detector, so one two-stage detector shows it);
Mask R-CNN (``TESTED``) also runs ``test.py`` of the last checkpoint, which
detects boxes and masks in every val image and reports the bbox and segm mAP of
the training run's last evaluation (Faster R-CNN's ``test.py`` runs in the
2-process test; RetinaNet's, the same route through ``test.py``, was 4 s of the
suite and every detector's training already evaluates each epoch). A
2-process ``torchrun`` run (gloo) of Faster R-CNN with validation on finishes
within ``DIST_DEADLINE`` and its last evaluation equals a one-process
``test.py`` of its checkpoint. (test_mmdet_mmcv_full.py compares with mmcv-full.)

It needs a Python with mmcv 1.7.2 (``MMCV_WITH_OPS=0``) and mmdet 2.28.2, found
as tests/mmcv_python.py says; skipped with the reason otherwise. On top of the
venv of tests/compat/test_mmcv_e2e.py::

    pip install --no-deps mmdet==2.28.2 six terminaltables pycocotools
"""

import glob
import json
import math
import os
import os.path as osp
import pickle
import signal
import subprocess
from typing import Dict, List

import numpy as np
import pytest
import torch

import mmcv_python  # tests/mmcv_python.py
from test_mmcv_e2e import TIMING, _load

pytestmark = pytest.mark.slow

HERE = osp.dirname(osp.abspath(__file__))
REPO = osp.dirname(osp.dirname(HERE))
DEADLINE = 300  # seconds per command (each takes 10-50 on 2 busy cores); a hang is killed
ROI_ALIGN = ('nms', 'roi_align_forward', 'roi_align_backward')
#: config -> (evaluation metrics, mmcv._ext ops the training run must call).
DETECTORS = {
    'retinanet': (('bbox', ), ('nms', )),
    'faster_rcnn': (('bbox', ), ROI_ALIGN),
    'mask_rcnn': (('bbox', 'segm'), ROI_ALIGN),
    'faster_rcnn_dcn': (('bbox', ), ROI_ALIGN + ('modulated_deform_conv_forward',
                                                 'modulated_deform_conv_backward')),
}
# FCOS (anchor-free; the same ops as RetinaNet, so nothing of mtrain's that RetinaNet does not
# reach) runs on request: MTRAIN_ALL_DETECTORS=1 (6 s of the suite's five minutes).
if os.environ.get('MTRAIN_ALL_DETECTORS') == '1':
    DETECTORS['fcos'] = (('bbox', ), ('nms', ))
#: Resumed and tested with test.py too; the others train (and evaluate) only, to save time.
RESUMED = ('faster_rcnn', )
TESTED = ('mask_rcnn', )
DIST_DEADLINE = 150  # the 2-process run takes 50 s on 2 cores under a load of 14


@pytest.fixture(scope='module')
def world(tmp_path_factory):
    """(python, data root, mmdet's tools folder, subprocess environment)."""
    python = mmcv_python.find(
        'import mmcv, mmdet; print(mmcv.__version__, mmdet.__version__)', ['1.7.2', '2.28.2'],
        'mmcv 1.7.2 (MMCV_WITH_OPS=0) and mmdet 2.28.2 (+ pycocotools, six, terminaltables)')
    root = str(tmp_path_factory.mktemp('mmdet_e2e'))
    subprocess.run([python, osp.join(HERE, 'mmdet_e2e_setup.py'), root], check=True)
    tools = subprocess.run([python, '-c', 'import mmdet, os; print(os.path.join(os.path.dirname('
                                          'mmdet.__file__), ".mim", "tools"))'],
                           capture_output=True, text=True, check=True).stdout.strip()
    environ = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, HERE]), CUDA_VISIBLE_DEVICES='',
                   OMP_NUM_THREADS='1')
    return python, root, tools, environ


def _run(cmd: List[str], cwd: str, environ: dict, deadline: int = DEADLINE) -> str:
    """Run ``cmd`` in a session of its own; its output, or a failure (past ``deadline`` too)."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=environ, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=deadline)
    except subprocess.TimeoutExpired:
        out = _stop(proc)
        pytest.fail(f'no result after {deadline} s (a hang): {" ".join(cmd)}\n{out[-4000:]}')
    assert proc.returncode == 0, f'{" ".join(cmd)} failed:\n{out[-6000:]}'
    return out


def _stop(proc: subprocess.Popen) -> str:
    """End a command past its deadline; its output so far.

    SIGTERM first: torchrun starts each rank in a session of its own, so only
    torchrun itself can stop them (a SIGKILL to its group leaves both ranks
    running and holding the output pipe).
    """
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        return proc.communicate(timeout=60)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.communicate()[0]


def _mmdet(world, tool: str, *args: str) -> str:
    """``python -m mtrain.compat.run --list-ops tools/<tool> ARGS`` on one process."""
    python, root, tools, environ = world
    return _run([python, '-m', 'mtrain.compat.run', '--list-ops', osp.join(tools, tool), *args],
                root, environ)


def _train(world, name: str, work_dir: str, *extra: str) -> str:
    config = osp.join(world[1], f'{name}.py')
    return _mmdet(world, 'train.py', config, '--work-dir', work_dir, '--seed', '0',
                  '--deterministic', *extra)


def _ops(output: str) -> Dict[str, str]:
    """``{op: implementation}`` from the ``--list-ops`` lines at the end of ``output``."""
    listed = output.rsplit('mmcv ops called:\n', 1)[1].splitlines()
    return dict(line.strip().split(' -> ') for line in listed if ' -> ' in line)


def _log(work_dir: str) -> List[dict]:
    """The ``*.log.json`` records after the env line, without timings."""
    [path] = glob.glob(osp.join(work_dir, '*.log.json'))
    with open(path) as f:
        records = [json.loads(line) for line in f][1:]
    return [{k: v for k, v in r.items() if k not in TIMING} for r in records]


def _metrics(record: dict, metrics) -> dict:
    return {k: v for k, v in record.items() if k.split('_')[0] in metrics}


def _assert_served(output: str, wanted) -> None:
    ops = _ops(output)
    assert set(wanted) <= set(ops), f'ops called: {ops}'
    for op, implementation in ops.items():
        assert implementation.startswith('mtrain.compat.ops.'), (op, implementation)


def _assert_trains(log: List[dict], metrics) -> None:
    """Finite losses, the second epoch's mean below the first's, an evaluation per epoch."""
    train = [r for r in log if r['mode'] == 'train']
    assert len(train) == 8  # 2 epochs x 4 iterations
    for record in train:
        losses = {k: v for k, v in record.items() if k.startswith('loss')}
        assert losses and all(math.isfinite(v) for v in losses.values()), record
    mean = [sum(r['loss'] for r in train if r['epoch'] == e) / 4 for e in (1, 2)]
    assert mean[1] < mean[0], mean
    val = [r for r in log if r['mode'] == 'val']
    assert [r['epoch'] for r in val] == [1, 2]
    for metric in metrics:
        assert 0 <= val[-1][f'{metric}_mAP'] <= 1, val[-1]


def _assert_same_weights(path_a: str, path_b: str) -> None:
    a, b = _load(path_a)['state_dict'], _load(path_b)['state_dict']
    assert a.keys() == b.keys()
    for name, value in a.items():
        assert torch.equal(value, b[name]), name


def _assert_detections(path: str, with_masks: bool) -> None:
    """Each val image got boxes past nms (``score_thr=0``), at most ``max_per_img``, and masks."""
    with open(path, 'rb') as f:
        results = pickle.load(f)
    assert len(results) == 4
    for result in results:
        boxes, masks = result if with_masks else (result, None)
        assert len(boxes) == 2  # one array per class
        assert 0 < sum(len(b) for b in boxes) <= 20
        for b in boxes:
            assert b.shape[1:] == (5, ) and np.isfinite(b).all()
        if with_masks:
            assert [len(m) for m in masks] == [len(b) for b in boxes]


def _assert_test_py_agrees(world, name: str, metrics, checkpoint: str, last_val: dict,
                           work_dir: str, wanted_ops) -> None:
    """mmdet's ``tools/test.py`` of ``checkpoint`` reports the metrics of ``last_val``."""
    results = osp.join(work_dir, 'results.pkl')
    out = _mmdet(world, 'test.py', osp.join(world[1], f'{name}.py'), checkpoint,
                 '--eval', *metrics, '--work-dir', work_dir, '--out', results)
    _assert_served(out, wanted_ops)
    _assert_detections(results, with_masks='segm' in metrics)
    [path] = glob.glob(osp.join(work_dir, 'eval_*.json'))
    with open(path) as f:
        reported = json.load(f)['metric']
    assert reported == _metrics(last_val, metrics)


@pytest.mark.parametrize('name', list(DETECTORS))
def test_detector_trains_resumes_and_tests(world, tmp_path, name):
    metrics, wanted_ops = DETECTORS[name]
    work = str(tmp_path / 'train')
    out = _train(world, name, work)
    _assert_served(out, wanted_ops)
    log = _log(work)
    _assert_trains(log, metrics)
    assert {'epoch_1.pth', 'epoch_2.pth', 'latest.pth'} <= set(os.listdir(work))

    if name in RESUMED:  # the second epoch again from epoch_1.pth: the same, bit for bit
        resumed = str(tmp_path / 'resumed')
        _train(world, name, resumed, '--resume-from', osp.join(work, 'epoch_1.pth'))
        assert _log(resumed) == [r for r in log if r['epoch'] == 2]
        _assert_same_weights(osp.join(resumed, 'epoch_2.pth'), osp.join(work, 'epoch_2.pth'))
    if name in TESTED:
        last_val = [r for r in log if r['mode'] == 'val'][-1]
        _assert_test_py_agrees(world, name, metrics, osp.join(work, 'epoch_2.pth'), last_val,
                               str(tmp_path / 'test'), ('nms', ))


def test_two_processes_with_validation(world, tmp_path):
    """``torchrun`` x2 (gloo) of Faster R-CNN with validation on: no hang, test.py's metrics.

    The harness replaces only mmdet's CUDA-only ``build_ddp`` (``cpu_ddp_train.py``).
    """
    python, root, tools, environ = world
    work = str(tmp_path / 'dist')
    _run([python, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node', '2',
          '-m', 'mtrain.compat.run', osp.join(HERE, 'cpu_ddp_train.py'),
          osp.join(tools, 'train.py'), osp.join(root, 'faster_rcnn.py'), '--launcher', 'pytorch',
          '--work-dir', work, '--seed', '0'], root, environ, DIST_DEADLINE)
    log = _log(work)
    assert [(r['mode'], r['epoch']) for r in log] == [  # 8 images / (2 ranks x 2): 2 iterations
        ('train', 1), ('train', 1), ('val', 1), ('train', 2), ('train', 2), ('val', 2)]
    assert all(math.isfinite(r['loss']) for r in log if r['mode'] == 'train')
    assert {'epoch_1.pth', 'epoch_2.pth'} <= set(os.listdir(work))
    # The 2 ranks each scored half the val images, gathered on rank 0: one process agrees.
    _assert_test_py_agrees(world, 'faster_rcnn', ('bbox', ), osp.join(work, 'epoch_2.pth'),
                           log[-1], str(tmp_path / 'test'), ('nms', ))
