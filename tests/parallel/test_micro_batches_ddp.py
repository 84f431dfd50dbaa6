"""optimizer_config.micro_batch on 2 DDP ranks where only rank 1 runs out of memory.

Both ranks must take the smaller size (no deadlock: they agree after every
attempt), stay equal, and end with the weights of a 2-rank run that used
micro-batches of that size from the start (bitwise), and with the unsplit
DDP run's to float tolerance. Windows of 2 iterations: the gradients are
averaged over the ranks only at a window's end.
"""

import os

import pytest
import torch
from torch import nn

from dist_launch import launch
from mtrain.datasets import build_dataloader
from mtrain.hooks import GradientCumulativeOptimizerHook
from mtrain.parallel import MTDistributedDataParallel
from mtrain.runner import EpochBasedRunner
from mtrain.utils import get_logger

pytestmark = pytest.mark.slow


class RankLimit(nn.Module):
    """Linear → ReLU → Linear, out of memory in a forward of more than ``limit`` samples.

    ``seen`` adds up this rank's inputs: DDP broadcasts rank 0's at the start
    of every window, which the micro-batch runs must do too.
    """

    def __init__(self, limit: int) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1, self.fc2, self.limit = nn.Linear(4, 8), nn.Linear(8, 3), limit
        self.register_buffer('seen', torch.zeros(()))

    def forward(self, img, gt_label=None):
        if img.shape[0] > self.limit:
            raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 2.00 GiB')
        self.seen += img.sum()
        logits = self.fc2(torch.relu(self.fc1(img)))
        return {'loss_cls': nn.functional.cross_entropy(logits, gt_label)}


def _train(rank, dataset, work_dir, micro, limit):
    model = MTDistributedDataParallel(RankLimit(limit))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    runner = EpochBasedRunner(model, optimizer=optimizer, work_dir=work_dir,
                              logger=get_logger(), max_epochs=1)
    runner.register_hook(GradientCumulativeOptimizerHook(cumulative_iters=2, micro_batch=micro))
    runner.run([build_dataloader(dataset, 8, 0, shuffle=True, seed=3)], [('train', 1)])
    return runner


def _job(rank, dataset, out_dir):
    runs = {'auto': _train(rank, dataset, out_dir, 'auto', 2 if rank == 1 else 8),
            'fixed': _train(rank, dataset, out_dir, 2, 8),
            'whole': _train(rank, dataset, out_dir, None, 8)}
    torch.save({name: (r.optim_step.micro_batch.size, r.num_updates,
                       {k: v.clone() for k, v in r.model_wrapper.module.state_dict().items()})
                for name, r in runs.items()}, os.path.join(out_dir, f'rank{rank}.pt'))


def test_one_ranks_out_of_memory_error_splits_every_rank(tmp_path, toy_dataset):
    codes, _ = launch(_job, toy_dataset, str(tmp_path))
    assert codes == [0, 0]
    ranks = [torch.load(tmp_path / f'rank{r}.pt', weights_only=True) for r in (0, 1)]
    for run in ranks:
        assert run['auto'][0] == run['fixed'][0] == 2 and run['whole'][0] is None
        assert run['auto'][1] == run['whole'][1] == 2  # 4 iterations in windows of 2
        for k, v in run['auto'][2].items():
            assert torch.equal(v, run['fixed'][2][k]), k
            if k != 'seen':  # (each rank's own since the last broadcast)
                assert torch.equal(v, ranks[0]['auto'][2][k]), k  # the ranks stay equal
            # DDP's own sync sums in another order: float tolerance (measured: 1.9e-9 for
            # the weights, 1e-6 for the sum of inputs)
            torch.testing.assert_close(v, run['whole'][2][k], rtol=0, atol=1e-5)
