"""nan_policy='skip' on 2 ranks: a NaN on one rank skips the step on both, weights stay equal."""

import os

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from dist_launch import launch
from mtrain.datasets import build_dataloader
from mtrain.hooks import Hook, NanGuardHook
from mtrain.parallel import MTDistributedDataParallel
from mtrain.runner import IterBasedRunner
from mtrain.utils import get_dist_info, get_logger
from toy_training import params

pytestmark = pytest.mark.slow


class _PoisonOnRank(Hook):
    """Make the loss NaN on one rank at one (1-based) iteration, after the forward."""

    priority = 'VERY_HIGH'  # before the NanGuardHook (HIGH) and the OptimizerHook

    def __init__(self, rank: int, iteration: int) -> None:
        self.rank, self.iteration = rank, iteration

    def after_train_iter(self, runner) -> None:
        if runner.rank == self.rank and runner.iter + 1 == self.iteration:
            runner.outputs['loss'] = runner.outputs['loss'] * float('nan')
            runner.outputs['log_vars'] = dict(runner.outputs['log_vars'],
                                              loss=runner.outputs['loss'].detach())


class _Regression(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 1)

    def forward(self, x, y):
        return {'loss': (self.fc(x) - y).pow(2).mean()}


def _nan_skip_job(rank, out_dir):
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(32, 4, generator=g), torch.randn(32, 1, generator=g))
    model = MTDistributedDataParallel(_Regression())
    runner = IterBasedRunner(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                             logger=get_logger(), max_iters=6)
    runner.register_training_hooks(optimizer_config={})
    guard = NanGuardHook(action='skip')
    runner.register_hook(guard)
    runner.register_hook(_PoisonOnRank(rank=1, iteration=3))
    loader = build_dataloader(data, 4, 0, shuffle=True, seed=1)
    runner.run([loader], [('train', 1)])
    torch.save(dict(params=params(model.module), skipped=guard.skipped,
                    updates=runner.num_updates, world_size=get_dist_info()[1]),
               os.path.join(out_dir, f'rank{rank}.pt'))


def test_a_nan_on_one_rank_skips_the_step_on_every_rank(tmp_path):
    codes, _ = launch(_nan_skip_job, str(tmp_path), timeout=60)
    assert codes == [0, 0]  # no rank waited for an all-reduce the other skipped
    r0, r1 = (torch.load(tmp_path / f'rank{r}.pt', weights_only=True) for r in (0, 1))
    assert r0['world_size'] == 2
    assert r0['skipped'] == r1['skipped'] == 1
    assert r0['updates'] == r1['updates'] == 5
    for name, value in r0['params'].items():
        assert torch.equal(value, r1['params'][name]), name
        assert torch.isfinite(value).all()
