"""Run by a Python with mmcv 1.7.2 (test_val_points.py): where its real EvalHook evaluates.

Prints JSON ``[[by_epoch, start, interval, length, points], ...]`` over a grid
of every start (None, 0 .. length + 1) and interval (1 .. length + 1), by
epoch under EpochBasedRunner and by iteration under IterBasedRunner. A point
is the 1-based epoch/iteration just trained, 0 before training.
"""

import json
import logging
import sys
import tempfile
import time

import torch
from mmcv.runner import EpochBasedRunner, EvalHook, Hook, IterBasedRunner
from torch import nn
from torch.utils.data import DataLoader, Dataset

time.sleep = lambda seconds: None  # mmcv's runners sleep 2 s an epoch "to prevent deadlock"
_AT = {'calls': []}


class _Data(Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        return torch.zeros(2)

    def evaluate(self, results, logger=None, **kwargs):
        _AT['calls'].append(_AT['now'])
        return {'acc': 0.}


class _Where(Hook):
    """Runs before EvalHook: where training is when it evaluates."""

    def before_train_epoch(self, runner):
        _AT['now'] = runner.epoch

    def before_train_iter(self, runner):
        _AT['now'] = runner.epoch if _AT['by_epoch'] else runner.iter

    def after_train_iter(self, runner):
        _AT['now'] = runner.iter + 1

    def after_train_epoch(self, runner):
        _AT['now'] = runner.epoch + 1


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(2, 1)

    def train_step(self, x, optimizer, **kwargs):
        return dict(loss=self.fc(x).sum(), log_vars={}, num_samples=len(x))


def points(start, interval, length, by_epoch):
    runner_cls = EpochBasedRunner if by_epoch else IterBasedRunner
    runner = runner_cls(_Net(), work_dir=tempfile.mkdtemp(), logger=logging.getLogger('m'),
                        **{'max_epochs' if by_epoch else 'max_iters': length})
    runner.register_hook(_Where(), 'VERY_HIGH')
    runner.register_hook(EvalHook(DataLoader(_Data(2)), start=start, interval=interval,
                                  by_epoch=by_epoch, test_fn=lambda model, loader: []), 'LOW')
    _AT.update(calls=[], by_epoch=by_epoch)
    runner.run([DataLoader(_Data(4 if by_epoch else 40), batch_size=2)], [('train', 1)])
    return _AT['calls']


if __name__ == '__main__':
    longest = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    rows = [[by_epoch, s, k, n, points(s, k, n, by_epoch)]
            for by_epoch in (True, False) for n in range(1, longest + 1)
            for s in [None, *range(0, n + 2)] for k in range(1, n + 2)]
    print(json.dumps(rows))
