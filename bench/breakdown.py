"""Where mtrain's per-iteration overhead goes: ``python bench/breakdown.py``.

A model with one scalar parameter (almost no compute) trains on in-memory
batches (no data loader), so what remains is each loop's own Python. The plain
loop and several mtrain runners (all default hooks; then without one hook
each; then with none but the optimizer hook) advance one 64-iteration epoch at
a time in turn, many times over, so a change in machine load hits all of them
alike; each figure is the median over the epochs of (variant − plain loop), in
CPU µs per iteration. The plain loop steps a ``CosineAnnealingLR`` and logs
``loss.item()`` every 50 iterations, as mtrain's LR hook and logger do.

Every ``--rebuild`` epochs all loops are built again from scratch. Where a
loop's objects happen to lie in memory shifts its time by a few µs per
iteration (cache sets, dict layouts), the same code measuring 3–4 µs apart
from one build to the next; fresh objects every round average that out. Each
fresh loop first runs ``WARMUP_ITERS`` iterations untimed, so the timed
epochs measure a warm loop.

Usage::

    python bench/breakdown.py [--epochs 400] [--rebuild 20]
"""

import argparse
import logging
import statistics
import sys
import tempfile
import time
from typing import Callable, Dict, List, Sequence

import torch
from torch import nn

from mtrain.hooks import NanGuardHook
from mtrain.runner import EpochBasedRunner

BATCHES = [{'img': torch.zeros(4, 4), 'gt_label': torch.zeros(4, dtype=torch.long)}] * 64
HOOKS = ('CosineAnnealingLrUpdaterHook', 'IterTimerHook', 'NanGuardHook', 'TextLoggerHook',
         'CheckpointHook')
LOGGER = logging.getLogger('bench.breakdown')
LOGGER.addHandler(logging.NullHandler())
LOGGER.propagate = False


class ScalarModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(()))

    def forward(self, img: torch.Tensor, gt_label: torch.Tensor = None) -> Dict:
        return {'loss': self.w * 2}


def _optimizer(model: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)


def plain_epochs(total_epochs: int) -> Callable[[], None]:
    model = ScalarModel()
    optimizer = _optimizer(model)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, total_epochs * 64)
    state = {'it': 0}

    def epoch() -> None:
        for batch in BATCHES:
            loss = model(batch['img'], batch['gt_label'])['loss']
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            state['it'] += 1
            if state['it'] % 50 == 0:
                LOGGER.info(f'iter {state["it"]} loss {loss.item():.4f}')
    return epoch


def mtrain_epochs(total_epochs: int, work_dir: str, drop: Sequence[str] = ()) -> Callable:
    """An mtrain runner with the default hooks but ``drop``, advanced one epoch per call."""
    model = ScalarModel()
    runner = EpochBasedRunner(model, optimizer=_optimizer(model), work_dir=work_dir,
                              logger=LOGGER, max_epochs=total_epochs)
    configs = dict(lr_config=dict(policy='CosineAnnealing', min_lr=0., by_epoch=False),
                   timer_config=dict(type='IterTimerHook'),
                   checkpoint_config=dict(interval=-1),
                   log_config=dict(interval=50, hooks=[dict(type='TextLoggerHook')]))
    for hook, key in zip(HOOKS, ('lr_config', 'timer_config', None, 'log_config',
                                 'checkpoint_config')):
        if hook in drop and key is not None:
            configs[key] = None
    runner.register_training_hooks(optimizer_config={}, **configs)
    if 'NanGuardHook' not in drop:
        runner.register_hook(NanGuardHook(interval=50))
    runner._max_iters = total_epochs * 64  # what run() sets before calling before_run
    runner.call_hook('before_run')
    return lambda: runner.train(BATCHES)


def measure(variants: Dict[str, Callable], epochs: int) -> Dict[str, List[float]]:
    times: Dict[str, List[float]] = {name: [] for name in variants}
    for _ in range(epochs):
        for name, epoch in variants.items():
            start = time.process_time()
            epoch()
            times[name].append((time.process_time() - start) / 64 * 1e6)
    return times


WARMUP_ITERS = 512  # (once the LR hook's batch of computed-ahead values; kept for comparison)
WARMUP_EPOCHS = -(-WARMUP_ITERS // len(BATCHES))


def build_variants(total_epochs: int, work_dir: str) -> Dict[str, Callable]:
    """The plain loop and the mtrain runners, freshly built and warmed up (see above)."""
    variants = {'plain loop': plain_epochs(total_epochs), 'mtrain, default hooks':
                mtrain_epochs(total_epochs, work_dir)}
    for hook in HOOKS:
        variants[f'  without {hook}'] = mtrain_epochs(total_epochs, work_dir, [hook])
    variants['  optimizer hook only'] = mtrain_epochs(total_epochs, work_dir, HOOKS)
    for epoch in variants.values():
        for _ in range(WARMUP_EPOCHS):
            epoch()
    return variants


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description='Per-hook cost of the mtrain loop.')
    parser.add_argument('--epochs', type=int, default=400)
    parser.add_argument('--rebuild', type=int, default=20,
                        help='build every loop afresh after this many epochs')
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    times: Dict[str, List[float]] = {}
    with tempfile.TemporaryDirectory() as work_dir:
        done = 0
        while done < args.epochs:
            rounds = min(args.rebuild, args.epochs - done)
            # (one epoch more than run: no end-of-run checkpoint is timed)
            variants = build_variants(WARMUP_EPOCHS + rounds + 1, work_dir)
            for name, values in measure(variants, rounds).items():
                times.setdefault(name, []).extend(values)
            done += rounds
    plain = times['plain loop']
    print(f'# CPU µs per iteration, median over {args.epochs} interleaved epochs of 64 '
          f'(loops rebuilt every {args.rebuild})')
    for name, values in times.items():
        extra = statistics.median([v - p for v, p in zip(values, plain)])
        print(f'{name:<46} {statistics.median(values):8.1f}   {extra:+7.1f} vs plain')
    return 0


if __name__ == '__main__':
    sys.exit(main())
