"""SyncBuffersHook (mean of every buffer over 2 gloo ranks) and ClosureHook."""

import os.path as osp
import sys

import pytest
import torch
from torch import nn

from conftest import ToyDataset
from mtrain.datasets import build_dataloader
from mtrain.hooks import ClosureHook, Hook, OptimizerHook, SyncBuffersHook
from mtrain.runner import EpochBasedRunner
from mtrain.utils import get_logger

sys.path.insert(0, osp.join(osp.dirname(osp.abspath(__file__)), '..', 'parallel'))
from dist_launch import launch  # noqa: E402


class _BNModel(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.bn = nn.BatchNorm1d(4)
        self.fc = nn.Linear(4, 3)

    def forward(self, img, gt_label=None):
        return {'loss': nn.functional.cross_entropy(self.fc(self.bn(img)), gt_label)}


class _BuffersBeforeSync(Hook):
    priority = 'HIGH'  # after the epoch, before SyncBuffersHook (NORMAL)

    def after_train_epoch(self, runner):
        self.buffers = {n: b.clone() for n, b in runner.model_wrapper.module.named_buffers()}


def _sync_job(rank, out_dir):
    # Not DDP-wrapped: each rank's BatchNorm statistics follow its own share of the data.
    model = _BNModel()
    runner = EpochBasedRunner(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                              logger=get_logger(), max_epochs=1)
    before = _BuffersBeforeSync()
    for hook in (OptimizerHook(), before, SyncBuffersHook()):
        runner.register_hook(hook)
    runner.run([build_dataloader(ToyDataset(), 8, 0, shuffle=True, seed=rank)], [('train', 1)])
    torch.save({'before': before.buffers, 'after': dict(model.named_buffers())},
               osp.join(out_dir, f'rank{rank}.pt'))


@pytest.mark.slow
def test_sync_buffers_averages_every_buffer_over_two_ranks(tmp_path):
    codes, _ = launch(_sync_job, str(tmp_path), timeout=300)
    assert codes == [0, 0]
    ranks = [torch.load(tmp_path / f'rank{r}.pt', weights_only=True) for r in range(2)]
    assert not torch.equal(ranks[0]['before']['bn.running_mean'],
                           ranks[1]['before']['bn.running_mean'])
    for name in ('bn.running_mean', 'bn.running_var'):
        mean = (ranks[0]['before'][name] + ranks[1]['before'][name]) / 2
        for rank in ranks:
            torch.testing.assert_close(rank['after'][name], mean, rtol=0, atol=1e-6)
    assert [r['after']['bn.num_batches_tracked'].item() for r in ranks] == [4, 4]


def test_sync_buffers_in_one_process_changes_nothing(make_runner, toy_loader):
    runner = make_runner(model=_BNModel(), max_len=1)
    runner.register_hook(OptimizerHook())
    runner.register_hook(SyncBuffersHook())
    runner.run([toy_loader], [('train', 1)])
    assert runner.model_wrapper.module.bn.num_batches_tracked.item() == len(toy_loader)


def test_closure_hook_runs_its_function_at_its_stage(make_runner, toy_loader):
    epochs, iters = [], []
    runner = make_runner(max_len=2)
    runner.register_hook(OptimizerHook())
    runner.register_hook(ClosureHook('after_train_epoch', lambda r: epochs.append(r.epoch)))
    runner.register_hook(ClosureHook('after_iter', lambda r: iters.append(r.mode)))
    runner.run([toy_loader, toy_loader], [('train', 1), ('val', 1)])
    assert epochs == [0, 1]
    assert iters == (['train'] * 8 + ['val'] * 8) * 2  # a generic stage: train and val
    with pytest.raises(ValueError, match='not a hook stage'):
        ClosureHook('after_trian_epoch', print)
    with pytest.raises(TypeError, match='callable'):
        ClosureHook('after_run', 'print')
