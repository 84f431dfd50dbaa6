"""Side by side with mmcv 1.7.2 itself: init weights bit for bit, the init log, collate/scatter.

Needs a Python with mmcv 1.7.2 (pure Python, ``MMCV_WITH_OPS=0``) and the same
torch, found as tests/mmcv_python.py says; skipped with the reason otherwise.
"""

import os
import runpy
import subprocess
import sys

import pytest
import torch

import mmcv_python  # tests/mmcv_python.py

pytestmark = pytest.mark.slow
SCRIPT = os.path.join(os.path.dirname(__file__), 'mmcv_side_by_side.py')


def _mmcv_python():
    return mmcv_python.find('import mmcv, torch; print(mmcv.__version__, torch.__version__)',
                            ['1.7.2', torch.__version__],
                            'mmcv 1.7.2 (MMCV_WITH_OPS=0) and this torch')


def _run_mmcv(python, out):
    result = subprocess.run([python, SCRIPT, 'mmcv', str(out)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return torch.load(out / 'mmcv.pt', weights_only=False)


def _run_mtrain(out, monkeypatch):
    monkeypatch.setattr(sys, 'argv', [SCRIPT, 'mtrain', str(out)])
    torch_state = torch.get_rng_state()
    try:
        runpy.run_path(SCRIPT, run_name='side_by_side')
    finally:
        torch.set_rng_state(torch_state)
    return torch.load(out / 'mtrain.pt', weights_only=False)


def _assert_same(a, b, where='batch'):
    assert type(a) is type(b), where
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _assert_same(a[k], b[k], f'{where}.{k}')
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f'{where}[{i}]')
    else:
        assert a == b, where


def test_init_and_collate_match_mmcv_1_7_2(tmp_path, monkeypatch):
    theirs = _run_mmcv(_mmcv_python(), tmp_path)
    ours = _run_mtrain(tmp_path, monkeypatch)
    for phase in ('first', 'second'):  # second: a Pretrained child with a prefix
        assert ours[phase].keys() == theirs[phase].keys()
        for name, value in theirs[phase].items():
            assert torch.equal(ours[phase][name], value), f'{phase}: {name}'
    assert ours['log'] == theirs['log']
    _assert_same(ours['batches'], theirs['batches'])
