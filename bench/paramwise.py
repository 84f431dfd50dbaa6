"""What merged param groups save: LR + momentum hook µs/iter and optimizer.step ms.

``python bench/paramwise.py [--arch resnet50] [--iters 2000] [--steps 10]`` builds
the model (random weights, CPU) and two SGD optimizers with the README's
``paramwise_cfg=dict(norm_decay_mult=0.)``: mtrain's merged groups (one per
distinct setting) and mmcv 1.7.2's layout (one group per parameter). For each
it times

- the LR and momentum hooks' ``before_train_iter`` on a real runner, for a
  per-iteration schedule (cosine LR with linear warmup + cosine momentum,
  ``by_epoch=False``: they write every group every iteration) and a by-epoch
  one (``step`` LR + ``step`` momentum: nothing to write between epochs);
- ``optimizer.step()`` with every gradient set (median of ``--steps``).

Hook times are the best of ``--repeats`` runs of ``--iters`` iterations (the
machine is shared; the minimum is the least disturbed). One thread
(``torch.set_num_threads(1)``), as the other benchmarks here.
"""

import argparse
import logging
import statistics
import sys
import time

import torch
import torchvision

from mtrain.hooks import (CosineAnnealingLrUpdaterHook, CosineAnnealingMomentumUpdaterHook,
                          StepLrUpdaterHook, StepMomentumUpdaterHook)
from mtrain.optim import build_optimizer, get_param_groups
from mtrain.runner import IterBasedRunner

CFG = dict(type='SGD', lr=0.1, momentum=0.9, weight_decay=1e-4,
           paramwise_cfg=dict(norm_decay_mult=0.))
SCHEDULES = {
    'per-iteration': lambda: [
        CosineAnnealingLrUpdaterHook(min_lr_ratio=0.01, by_epoch=False, warmup='linear',
                                     warmup_iters=500, warmup_ratio=0.1),
        CosineAnnealingMomentumUpdaterHook(min_momentum_ratio=0.85 / 0.95, by_epoch=False)],
    'by-epoch': lambda: [StepLrUpdaterHook(step=[30, 60]),
                         StepMomentumUpdaterHook(step=[30, 60], gamma=0.9)],
}


def optimizers(model):
    """The merged optimizer mtrain builds, and mmcv's one-group-per-parameter one."""
    merged = build_optimizer(model, CFG)
    per_param = torch.optim.SGD(
        get_param_groups(model, CFG['lr'], CFG['weight_decay'], CFG['paramwise_cfg'],
                         merge=False), lr=CFG['lr'], momentum=CFG['momentum'],
        weight_decay=CFG['weight_decay'])
    return {'merged': merged, 'per-parameter': per_param}


def hook_us_per_iter(model, optimizer, schedule: str, iters: int) -> float:
    """Mean µs of the two hooks' before_train_iter over ``iters`` iterations of a real runner."""
    logger = logging.getLogger('bench.paramwise')
    runner = IterBasedRunner(model, optimizer=optimizer, logger=logger, max_iters=iters * 10)
    runner.data_loader = range(iters)  # one epoch covers the timed iterations
    hooks = SCHEDULES[schedule]()
    for hook in hooks:
        hook.before_run(runner)
        hook.before_train_epoch(runner)
    calls = [hook.before_train_iter for hook in hooks]
    start = time.perf_counter()
    for i in range(iters):
        runner._iter = i  # what the loop advances; the hooks read runner.iter
        for call in calls:
            call(runner)
    return (time.perf_counter() - start) / iters * 1e6


def step_ms(model, optimizer, steps: int) -> float:
    """Median ms of ``optimizer.step()`` with every gradient set."""
    for p in model.parameters():
        p.grad = torch.randn_like(p) * 1e-3
    optimizer.step()  # momentum buffers allocated outside the timing
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        optimizer.step()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--arch', default='resnet50', help='a torchvision model builder')
    parser.add_argument('--iters', type=int, default=2000, help='iterations timed per hook run')
    parser.add_argument('--steps', type=int, default=10, help='optimizer steps timed')
    parser.add_argument('--repeats', type=int, default=5, help='hook runs; the best is kept')
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    logging.getLogger('mtrain').setLevel(logging.WARNING)
    model = getattr(torchvision.models, args.arch)()
    n_params = len(list(model.parameters()))
    print(f'# {args.arch}: {n_params} parameter tensors, paramwise_cfg={CFG["paramwise_cfg"]}')
    print(f'{"layout":<15}{"groups":>7}{"hooks per-iter µs":>19}{"hooks by-epoch µs":>19}'
          f'{"step ms":>9}')
    for layout, optimizer in optimizers(model).items():
        hooks = {s: min(hook_us_per_iter(model, optimizer, s, args.iters)
                        for _ in range(args.repeats)) for s in SCHEDULES}
        print(f'{layout:<15}{len(optimizer.param_groups):>7}{hooks["per-iteration"]:>19.1f}'
              f'{hooks["by-epoch"]:>19.1f}{step_ms(model, optimizer, args.steps):>9.1f}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
