"""A 1.x hook that saves on rank 0 only (``@master_only``) does not wait for the other rank.

mmcv 1.7.2's ``runner.save_checkpoint`` is rank-local; its own ``CheckpointHook``
saves from rank 0 alone. Before: mtrain's ``save_checkpoint`` gathered the
ranks' half-accumulated gradients (a collective) inside it, so rank 0 waited
for a rank that never came. Issue 21.
"""

import os

import pytest
import torch
from torch.utils.data import TensorDataset

from dist_launch import launch
from mtrain.datasets import build_dataloader
from mtrain.hooks import Hook
from mtrain.parallel import MTDistributedDataParallel
from mtrain.runner import IterBasedRunner
from mtrain.utils import get_logger
from test_nan_skip import _Regression  # the same one-layer regression

pytestmark = pytest.mark.slow


class _MasterOnlySave(Hook):
    """Saves on rank 0 only, inside an accumulation window (after iteration 3 of 2-per-step)."""

    priority = 'LOW'

    def __init__(self, out_dir):
        self.out_dir = out_dir

    def after_train_iter(self, runner):
        if runner.rank == 0 and runner.iter == 2:
            runner.save_checkpoint(self.out_dir, filename_tmpl='master_{}.pth')


def _job(rank, out_dir):
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(32, 4, generator=g), torch.randn(32, 1, generator=g))
    model = MTDistributedDataParallel(_Regression())
    runner = IterBasedRunner(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                             logger=get_logger(), max_iters=6)
    runner.register_training_hooks(optimizer_config=dict(
        type='GradientCumulativeOptimizerHook', cumulative_iters=2))
    runner.register_hook(_MasterOnlySave(out_dir))
    runner.run([build_dataloader(data, 4, 0, shuffle=True, seed=1)], [('train', 1)])
    torch.save(dict(iter=runner.iter), os.path.join(out_dir, f'rank{rank}.pt'))


def test_a_rank_0_only_save_does_not_deadlock_under_ddp(tmp_path):
    codes, _ = launch(_job, str(tmp_path), timeout=60)
    assert codes == [0, 0]
    assert sorted(os.listdir(tmp_path)) == ['latest.pth', 'master_3.pth', 'rank0.pt', 'rank1.pt']
    saved = torch.load(tmp_path / 'master_3.pth', weights_only=True)
    assert saved['meta']['iter'] == 3
    assert torch.load(tmp_path / 'rank1.pt', weights_only=True)['iter'] == 6
