"""micro_batch='auto': SIGKILL a real run after the split, ``--auto-resume``, end bitwise the same.

The resumed run takes the micro-batch size from the checkpoint: its model
never runs out of memory again (each out-of-memory error is counted in a
file), and its weights end bitwise where the uninterrupted run's end.
"""

import os.path as osp
import sys

import pytest
import torch

HERE = osp.dirname(osp.abspath(__file__))
sys.path.insert(0, HERE)  # kill_hook, imported by the runs through custom_imports
sys.path.insert(0, osp.join(osp.dirname(HERE), 'parallel'))
from dist_launch import launch  # noqa: E402
from tool_loader import ROOT, load_tool  # noqa: E402

pytestmark = pytest.mark.slow

TRAIN = load_tool('train')

HUNGRY = '''
import os

import torch

from mtrain.models.classifiers import LeNet
from mtrain.registry import MODELS


@MODELS.register_module(force=True)
class CountingHungryLeNet(LeNet):
    """Out of memory in a training forward of more than 8 images; each error adds a line."""

    def forward(self, img, gt_label=None, **kwargs):
        if self.training and img.shape[0] > 8:
            with open(os.environ['OOM_FILE'], 'a') as f:
                f.write(f'{img.shape[0]}\\n')
            raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 20.00 GiB')
        return super().forward(img, gt_label, **kwargs)
'''


def _job(rank, argv, env):
    import os
    os.environ.update(env)
    code = TRAIN.main(argv)
    if code:
        raise SystemExit(f'train.py exited with {code}')


def _train(config, work_dir, oom_file, kill_at='', resume=False):
    argv = [config, '--work-dir', str(work_dir)] + (['--auto-resume'] if resume else [])
    env = dict(OOM_FILE=str(oom_file), MTRAIN_KILL_AT=kill_at)
    codes, _ = launch(_job, argv, env, world_size=1, timeout=120, init=False)
    return codes[0]


def _errors(path):
    return path.read_text().split() if path.exists() else []


def test_killed_after_the_split_resumes_with_the_stored_size(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / 'hungry_lenet.py').write_text(HUNGRY)
    config = tmp_path / 'cfg.py'
    config.write_text(
        f"_base_ = ['{osp.join(ROOT, 'configs', 'digits', 'lenet_digits.py')}']\n"
        "custom_imports = dict(imports=['hungry_lenet', 'kill_hook'])\n"
        "custom_hooks = [dict(type='KillAtHook')]\n"
        "model = dict(type='CountingHungryLeNet')\n"
        "runner = dict(_delete_=True, type='IterBasedRunner', max_iters=6)\n"
        "optimizer_config = dict(micro_batch='auto')\n"
        "checkpoint_config = dict(interval=2)\nevaluation = None\n")
    full, killed = tmp_path / 'full', tmp_path / 'killed'
    assert _train(str(config), full, tmp_path / 'full_oom') == 0
    assert _errors(tmp_path / 'full_oom') == ['32', '16']  # 32 → 16 → 8, once
    assert _train(str(config), killed, tmp_path / 'killed_oom', kill_at='iter:5') == -9
    assert torch.load(killed / 'iter_4.pth', weights_only=True)['hooks']['OptimizerHook'][
        'micro_batch'] == 8
    assert _train(str(config), killed, tmp_path / 'resumed_oom', resume=True) == 0
    assert _errors(tmp_path / 'resumed_oom') == []  # the size came from iter_4.pth
    a = torch.load(full / 'iter_6.pth', weights_only=True)['state_dict']
    b = torch.load(killed / 'iter_6.pth', weights_only=True)['state_dict']
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
