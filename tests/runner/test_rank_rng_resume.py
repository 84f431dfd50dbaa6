"""Every rank's random state in the checkpoint (issue 32, item 2): a real 2-process gloo run
whose pipeline draws a data-dependent number of randoms on each rank's own samples, stopped
mid-epoch and resumed on 2 processes, ends bitwise where the uninterrupted run ends."""

import logging
import os.path as osp
import sys

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import Dataset

sys.path.insert(0, osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))), 'parallel'))
from dist_launch import launch  # noqa: E402
from mtrain.datasets import build_dataloader  # noqa: E402
from mtrain.hooks import DistSamplerSeedHook  # noqa: E402
from mtrain.parallel import MMDistributedDataParallel  # noqa: E402
from mtrain.runner import EpochBasedRunner  # noqa: E402
from mtrain.utils import set_random_seed  # noqa: E402
from test_user_loader_resume import StopAt  # noqa: E402

pytestmark = pytest.mark.slow

N, BATCH = 64, 4  # 8 iterations an epoch on each of 2 ranks


class RetryCrop(Dataset):
    """mmseg's ``RandomCrop(cat_max_ratio=...)`` pattern: numpy draws until the sample accepts.

    How many draws a sample takes depends on the sample, so ranks that load different samples
    leave the global numpy RNG in different states (all ranks are seeded alike, as 1.x
    training scripts seed them).
    """

    def __len__(self) -> int:
        return N

    def __getitem__(self, i):
        for _ in range(10):
            offset = float(np.random.rand())
            if offset < (i % 7 + 1) / 8:  # the sample's own acceptance rule
                break
        return {'x': torch.full((4,), i / N) + offset, 'idx': i}


class Recorder(nn.Module):
    """mmcv's model contract with dropout (torch RNG); records its losses."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 1)
        self.losses = []

    def forward(self, x):
        return self.fc(x)

    def train_step(self, data, optimizer):
        loss = (self.fc(nn.functional.dropout(data['x'], 0.5)) ** 2).mean()
        self.losses.append(loss.item())
        return dict(loss=loss, log_vars={'loss': loss.detach()}, num_samples=len(data['idx']))


def _job(rank, work_dir, out, stop_at, resume):
    set_random_seed(3)
    model = Recorder()
    runner = EpochBasedRunner(MMDistributedDataParallel(model),
                              optimizer=torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                              work_dir=work_dir, logger=logging.getLogger('mtrain.test'),
                              max_epochs=2)
    runner.register_training_hooks(lr_config=None, optimizer_config=dict(grad_clip=None),
                                   checkpoint_config=dict(interval=5, by_epoch=False),
                                   log_config=None)
    runner.register_hook(DistSamplerSeedHook())
    if stop_at is not None:
        runner.register_hook(StopAt(stop_at), 'LOWEST')
    if resume is not None:
        runner.resume(resume)
    runner.run([build_dataloader(RetryCrop(), BATCH, 0, shuffle=True, seed=3)], [('train', 1)])
    numpy_state = np.random.get_state()
    torch.save({'losses': model.losses, 'weight': model.fc.weight.detach().clone(),
                'bias': model.fc.bias.detach().clone(),
                'numpy': [numpy_state[1].tolist(), numpy_state[2]]},
               osp.join(out, f'rank{rank}.pt'))


def _run(tmp_path, name, work_dir, stop_at=None, resume=None):
    out = tmp_path / name
    out.mkdir()
    codes, _ = launch(_job, str(work_dir), str(out), stop_at, resume, timeout=300)
    assert codes == [0, 0]
    return [torch.load(out / f'rank{r}.pt', weights_only=True) for r in range(2)]


def test_two_process_resume_with_rank_dependent_draws_is_bitwise(tmp_path):
    full = _run(tmp_path, 'full', tmp_path / 'full_dir')
    assert full[0]['numpy'] != full[1]['numpy']  # the ranks' numpy streams did part
    _run(tmp_path, 'stopped', tmp_path / 'run', stop_at=5)
    ckpt = tmp_path / 'run' / 'iter_5.pth'
    resumed = _run(tmp_path, 'resumed', tmp_path / 'run', resume=str(ckpt))
    for rank in range(2):
        assert resumed[rank]['losses'] == full[rank]['losses'][5:], rank
        assert torch.equal(resumed[rank]['weight'], full[rank]['weight'])
        assert torch.equal(resumed[rank]['bias'], full[rank]['bias'])
    ranks = torch.load(ckpt, weights_only=True)['ranks']  # each rank's own, gathered
    assert len(ranks) == 2 and ranks[0]['rng']['numpy'] != ranks[1]['rng']['numpy']
