"""Test-only: a training job through the Python API with a loader the user built, as 1.x-era
training code hands it to ``runner.run`` (the kill-anywhere matrix's user-loader rows).

``job(rank, spec)`` runs in each forked rank (``dist_launch.launch``). Every iteration each
rank appends ``epoch iter idx,idx,...`` to ``seen_rank<r>.txt`` in ``spec['out']``; rank 0
saves the final weights there as ``final.pth``. ``spec['kill_at']`` SIGKILLs every rank
after that iteration's hooks (before its checkpoint is written). ``spec['val']`` adds a
``('val', 1)`` phase over a user-built val loader (no generator: each pass draws from the
global torch RNG); the epoch runner then writes a checkpoint at each epoch's end.
"""

import logging
import os
import os.path as osp
import signal

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from mtrain.datasets import build_dataloader
from mtrain.hooks import DistSamplerSeedHook, Hook
from mtrain.parallel import MMDataParallel, MMDistributedDataParallel
from mtrain.runner import EpochBasedRunner, IterBasedRunner
from mtrain.utils import get_dist_info

SAMPLES = 96


class Indexed(Dataset):
    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, i):
        return {'x': torch.full((4,), i / SAMPLES), 'idx': i}


class Recorder(nn.Module):
    """mmcv's model contract, with dropout so that the training draws from the global RNG."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 1)

    def forward(self, x):
        return self.fc(x)

    def train_step(self, data, optimizer):
        loss = (self.fc(nn.functional.dropout(data['x'], 0.5, self.training)) ** 2).mean()
        return dict(loss=loss, log_vars={'loss': loss.detach()}, num_samples=len(data['idx']))

    val_step = train_step  # (in eval mode: no dropout)


class Note(Hook):
    """Writes each iteration's samples; kills the job at ``kill_at``."""

    priority = 'LOWEST'

    def __init__(self, out: str, rank: int, kill_at) -> None:
        self.path, self.kill_at = osp.join(out, f'seen_rank{rank}.txt'), kill_at

    def after_train_iter(self, runner) -> None:
        with open(self.path, 'a') as f:
            idx = ','.join(map(str, runner.data_batch['idx'].tolist()))
            f.write(f'{runner.epoch} {runner.iter} {idx}\n')
        if self.kill_at is not None and runner.iter + 1 == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)  # every rank reaches it after the same step


def _loader(kind: str, batch: int):
    dataset = Indexed()
    rank, world = get_dist_info()
    if kind == 'shuffle':
        return DataLoader(dataset, batch_size=batch, shuffle=True)
    if kind == 'set_epoch':
        sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, seed=3)
        return DataLoader(dataset, batch_size=batch, sampler=sampler)
    return build_dataloader(dataset, batch, 0, shuffle=True, seed=3)  # 'mtrain'


def job(rank: int, spec: dict) -> None:
    torch.manual_seed(1)
    _, world = get_dist_info()
    model = Recorder()
    wrapped = MMDistributedDataParallel(model) if world > 1 else MMDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if spec['runner'] == 'Iter':
        runner = IterBasedRunner(wrapped, optimizer=optimizer, work_dir=spec['work_dir'],
                                 logger=logging.getLogger('mtrain.test'), max_iters=spec['length'])
    else:
        runner = EpochBasedRunner(wrapped, optimizer=optimizer, work_dir=spec['work_dir'],
                                  logger=logging.getLogger('mtrain.test'),
                                  max_epochs=spec['length'])
        runner.register_hook(DistSamplerSeedHook())
    by_epoch = bool(spec.get('val')) and spec['runner'] == 'Epoch'
    runner.register_training_hooks(lr_config=None, optimizer_config=dict(grad_clip=None),
                                   checkpoint_config=dict(interval=spec['interval'],
                                                          by_epoch=by_epoch), log_config=None)
    runner.register_hook(Note(spec['out'], rank, spec.get('kill_at')))
    if spec.get('resume'):
        runner.resume(osp.join(spec['work_dir'], 'latest.pth'))
    loaders, workflow = [_loader(spec['sampler'], spec['batch'])], [('train', 1)]
    if spec.get('val'):
        loaders.append(DataLoader(Indexed(), batch_size=spec['batch']))
        workflow.append(('val', 1))
    runner.run(loaders, workflow)
    if rank == 0:
        torch.save({k: v.clone() for k, v in model.state_dict().items()},
                   osp.join(spec['out'], 'final.pth'))


def seen(out: str, world: int):
    """``{(rank, iter): (epoch, [idx, ...])}``; a later line for the same step wins."""
    steps = {}
    for rank in range(world):
        with open(osp.join(out, f'seen_rank{rank}.txt')) as f:
            for line in f:
                epoch, it, idx = line.split()
                steps[(rank, int(it))] = (int(epoch), [int(i) for i in idx.split(',')])
    return steps
