"""A 1.x-era repository's training script: mmcv.runner / mmcv.parallel, started by dist_train.sh."""
import argparse
import json
import os.path as osp
import sys

import torch
from mmcv.parallel import MMDistributedDataParallel
from mmcv.runner import (EpochBasedRunner, build_optimizer, get_dist_info, init_dist,
                         set_random_seed)
from mmcv.utils import get_logger
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x, y=None, return_loss=True):
        return nn.functional.cross_entropy(self.fc(x), y) if return_loss else self.fc(x)

    def train_step(self, data, optimizer, **kwargs):
        loss = self(**data)
        return dict(loss=loss, log_vars=dict(loss=loss.item()), num_samples=len(data['x']))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--work-dir', required=True)
    parser.add_argument('--launcher', default='none')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args()
    init_dist(args.launcher, backend='gloo')
    rank, world_size = get_dist_info()
    set_random_seed(0)
    x = torch.randn(32, 4, generator=torch.Generator().manual_seed(0))
    data = [dict(x=a, y=(a[0] > 0).long()) for a in x]
    loader = DataLoader(data, batch_size=4, sampler=DistributedSampler(data, shuffle=False))
    model = MMDistributedDataParallel(Net(), broadcast_buffers=False)
    runner = EpochBasedRunner(model, optimizer=build_optimizer(model, dict(type='SGD', lr=0.1)),
                              work_dir=args.work_dir, logger=get_logger('repo'), max_epochs=2)
    runner.register_training_hooks(lr_config=dict(policy='fixed'), optimizer_config=dict(),
                                   checkpoint_config=dict(interval=2),
                                   log_config=dict(interval=2, hooks=[dict(type='TextLoggerHook')]))
    runner.run([loader], [('train', 1)])
    with open(osp.join(args.work_dir, f'rank{rank}.json'), 'w') as f:
        json.dump(dict(mmcv_runner=type(sys.modules['mmcv.runner']).__name__,
                       runner=type(runner).__module__, world_size=world_size,
                       weight=model.module.fc.weight.tolist()), f)


if __name__ == '__main__':
    main()
