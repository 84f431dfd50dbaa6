"""mtrain's cost measured the way users run it: ``python bench/train_py.py``.

Writes two real config files (``EpochBasedRunner`` and ``IterBasedRunner``)
to a temp dir and runs ``tools/train.py``'s ``main`` on them in this process,
next to a plain PyTorch loop over the same ``DataLoader`` (built by mtrain's
``build_dataloader`` with the same arguments the config gives).

The training, the same on all three sides: a 64→64→10 MLP
(``workloads.BenchClassifier``), batch 32 from 2,048 in-memory samples
(``workloads.BenchTensorDataset``, registered through the configs'
``custom_imports``), SGD (momentum 0.9, weight decay 1e-4), a step LR
schedule (×0.1 two thirds of the way), a text log line every 50 iterations,
one checkpoint at the end, one torch thread. The plain loop steps a
``MultiStepLR`` every iteration, logs ``loss.item()`` and the lr every 50
iterations and ``torch.save``-s model and optimizer at the end.

**What is timed.** mtrain: ``runner.run`` — called by ``tools/train.py``
exactly as in a user's run; the bench wraps the runner classes' ``run`` with
a clock (everything before it, parsing the config and building the runner,
is not timed; everything in it is: ``before_run``, every iteration, the
end-of-run checkpoint, ``after_run``). Plain loop: from before the first
batch to after the final ``torch.save``. Clock: CPU time of this process
(``time.process_time``; ``--clock wall`` for the wall clock). The three loops
run in turn, the order rotating every round, after one untimed warm-up run
each; figures are medians of µs per iteration over the rounds, and each ratio
is the median of the rounds' ratios to the plain loop of the same round.
"best" is each loop's fastest round (time on a shared CPU only ever adds to
a loop's own; the fastest round is the least disturbed), and its ratio the
fastest mtrain round over the fastest plain one.

**Per epoch.** Both loops also read the clock after every epoch's last
iteration (mtrain: ``workloads.BenchMarksHook`` in ``custom_hooks``, one set
lookup per iteration; the plain loop: the same lookup in its loop). The
second table takes each run's median epoch (epochs 2 to the last: no
``before_run``, no checkpoint), which a burst of other processes' work
during a few epochs does not move; its figures are then medians over the
rounds, as above. Epochs include their log lines, the LR step and the
epoch's start and end.

**Paired epochs** (``--lockstep``): each runner type and the plain loop run
in two threads of this process taking turns after every epoch
(:mod:`lockstep`), so each mtrain epoch is timed next to a plain one under
the same load; the figure is the median of the pairs' ratios. On a shared
machine this is the figure to read (docs/benchmarks.md says why).

Usage::

    python bench/train_py.py                      # 15 rounds of 2,048 iterations
    python bench/train_py.py --rounds 31 --epochs 16
    python bench/train_py.py --lockstep --rounds 16 --epochs 16   # epochs paired (lockstep.py)

Results and the machine they were taken on: ``docs/benchmarks.md``.
"""

import argparse
import contextlib
import gc
import importlib.util
import os
import os.path as osp
import statistics
import sys
import tempfile
from typing import Any, Callable, Dict, List, Tuple

import torch

from mtrain.datasets import build_dataloader
from mtrain.runner import EpochBasedRunner, IterBasedRunner
from lockstep import Lockstep, paired_ratios, run_paired
from workloads import BenchMarksHook, BenchTensorDataset, INTERVAL, clock, plain_loop, set_clock

BATCH, SAMPLES, DIM = 32, 2048, 64
PER_EPOCH = SAMPLES // BATCH
TRAIN_PY = osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))), 'tools', 'train.py')

CONFIG = """\
custom_imports = dict(imports=['workloads'], allow_failed_imports=False)
model = dict(type='BenchClassifier', arch='mlp')
data = dict(samples_per_gpu={batch}, workers_per_gpu=0,
            train=dict(type='BenchTensorDataset', n={samples}, shape=[{dim}]))
optimizer = dict(type='SGD', lr=0.01, momentum=0.9, weight_decay=1e-4)
optimizer_config = dict(grad_clip=None)
lr_config = dict(policy='step', step=[{step}]{extra})  # {unit}
runner = dict(type='{runner}', {length})
checkpoint_config = dict(interval=-1)  # only the last one
log_config = dict(interval={interval}, hooks=[dict(type='TextLoggerHook')])
# the bench's probe: the clock after every {per_epoch}th iteration (see bench/train_py.py)
custom_hooks = [dict(type='BenchMarksHook', marks={marks}, rss=False)]
workflow = [('train', 1)]
device = 'cpu'
"""


#: How the EpochBasedRunner config's step schedule counts: ``'epoch'`` (mmcv's default for
#: that runner: the LR hook does nothing between epochs, while the plain loop steps its
#: scheduler every iteration) or ``'iter'`` (``by_epoch=False``: per-iteration LR work on
#: both sides, as in the IterBasedRunner config). ``--epoch-lr-by-iter`` sets ``'iter'``.
EPOCH_SCHEDULE = 'epoch'


def write_configs(folder: str, epochs: int) -> Dict[str, str]:
    """The two config files: ``{'epoch': path, 'iter': path}``."""
    iters = epochs * PER_EPOCH
    common = dict(batch=BATCH, samples=SAMPLES, dim=DIM, interval=INTERVAL, per_epoch=PER_EPOCH,
                  marks=marks(epochs))
    by_iter = EPOCH_SCHEDULE == 'iter'
    texts = {
        'epoch': CONFIG.format(step=max(1, iters * 2 // 3 if by_iter else epochs * 2 // 3),
                               extra=', by_epoch=False' if by_iter else '',
                               unit='iterations' if by_iter else 'epochs',
                               runner='EpochBasedRunner', length=f'max_epochs={epochs}', **common),
        'iter': CONFIG.format(step=max(1, iters * 2 // 3), extra='',
                              unit='iterations (by_epoch=False: the '
                              "iteration runner's default)", runner='IterBasedRunner',
                              length=f'max_iters={iters}', **common),
    }
    paths = {}
    for name, text in texts.items():
        paths[name] = osp.join(folder, f'mlp_{name}.py')
        with open(paths[name], 'w') as f:
            f.write(text)
    return paths


def marks(epochs: int) -> List[int]:
    """Where both loops read the clock: after every epoch's last iteration."""
    return [PER_EPOCH * (e + 1) for e in range(epochs)]


def load_train_tool():
    spec = importlib.util.spec_from_file_location('mtrain_tools_train', TRAIN_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def timed_runs(spans: List[Tuple[float, Any]]):
    """Wrap both runner classes' ``run`` with the clock; each call appends (seconds, runner)."""
    originals = {cls: cls.__dict__['run'] for cls in (EpochBasedRunner, IterBasedRunner)}

    def wrap(run: Callable) -> Callable:
        def timed(self, *args, **kwargs):
            start = clock()
            try:
                return run(self, *args, **kwargs)
            finally:
                spans.append((clock() - start, self))
        return timed

    for cls, run in originals.items():
        cls.run = wrap(run)
    try:
        yield
    finally:
        for cls, run in originals.items():
            cls.run = run


def train_py_run(tool, config: str, work_dir: str) -> Tuple[float, Dict[int, float]]:
    """``tools/train.py CONFIG --work-dir W --seed 0``: seconds ``runner.run`` took, clock marks."""
    spans: List[Tuple[float, Any]] = []
    with timed_runs(spans), open(os.devnull, 'w') as null, contextlib.redirect_stderr(null):
        code = tool.main([config, '--work-dir', work_dir, '--seed', '0'])
    if code != 0 or len(spans) != 1:
        raise RuntimeError(f'tools/train.py {config} returned {code} ({len(spans)} runs timed)')
    elapsed, runner = spans[0]
    probe = next(h for h in runner.hooks if type(h).__name__ == 'BenchMarksHook')
    return elapsed, probe.times


def plain_run(epochs: int, work_dir: str,
              at_mark: Callable[[], None] = None) -> Tuple[float, Dict[int, float]]:
    """The plain loop over mtrain's ``DataLoader`` of the same dataset: seconds, clock marks."""
    loader = build_dataloader(BenchTensorDataset(SAMPLES, [DIM]), BATCH, 0, seed=0)
    wanted, times = set(marks(epochs)), {}

    def on_iter(it: int) -> None:  # the same check as the probe hook's
        if it in wanted:
            times[it] = clock()
            if at_mark is not None:
                at_mark()
    return plain_loop('mlp', epochs, work_dir, on_iter=on_iter, loader=loader,
                      scheduler=step_lr), times


def step_lr(optimizer: torch.optim.Optimizer, iters: int) -> Any:
    """The configs' step schedule as a plain loop writes it: ×0.1 two thirds of the way."""
    return torch.optim.lr_scheduler.MultiStepLR(optimizer, [max(1, iters * 2 // 3)], gamma=0.1)


def one_run(side: str, tool, configs: Dict[str, str], epochs: int):
    gc.collect()  # every side starts without the previous run's garbage
    with tempfile.TemporaryDirectory(prefix=f'bench_train_py_{side}_') as work_dir:
        if side == 'plain':
            return plain_run(epochs, work_dir)
        return train_py_run(tool, configs[side], work_dir)


def epoch_rates(times: Dict[int, float]) -> List[float]:
    """µs per iteration of each epoch but the first (whose start the two loops mark apart)."""
    points = sorted(t for t in times if t > 0)
    return [(times[b] - times[a]) / (b - a) * 1e6 for a, b in zip(points, points[1:])]


def measure(rounds: int, epochs: int, folder: str) -> Tuple[Dict[str, List[float]], Dict]:
    """Per side: µs/it of each whole run, and the median epoch's µs/it of each run."""
    tool = load_train_tool()
    sides = ['plain', 'epoch', 'iter']
    os.makedirs(osp.join(folder, 'warm'))
    warm = write_configs(osp.join(folder, 'warm'), 1)
    for side in sides:  # untimed warm-up: imports, first-call caches
        one_run(side, tool, warm, 1)
    configs = write_configs(folder, epochs)
    runs: Dict[str, List[float]] = {side: [] for side in sides}
    epochs_median: Dict[str, List[float]] = {side: [] for side in sides}
    for r in range(rounds):
        for side in sides[r % 3:] + sides[:r % 3]:
            elapsed, times = one_run(side, tool, configs, epochs)
            runs[side].append(elapsed / (epochs * PER_EPOCH) * 1e6)
            epochs_median[side].append(statistics.median(epoch_rates(times)))
    return runs, epochs_median


def measure_lockstep(rounds: int, epochs: int, folder: str) -> Dict[str, Tuple[List, ...]]:
    """Per runner type: ratios and differences (µs/it) of its epochs to the plain loop's
    paired with them, and the plain loop's µs/it in those epochs."""
    tool = load_train_tool()
    configs = write_configs(folder, epochs)
    paired: Dict[str, Tuple[List, List, List]] = {'epoch': ([], [], []), 'iter': ([], [], [])}
    for r in range(rounds):
        for side in ('epoch', 'iter') if r % 2 else ('iter', 'epoch'):
            first, second = ('mtrain', 'plain') if (r // 2) % 2 else ('plain', 'mtrain')
            lock = Lockstep(first, second, epochs, clock)
            BenchMarksHook.callbacks = (lambda: lock.start('mtrain'), lambda: lock.mark('mtrain'))
            gc.collect()
            with tempfile.TemporaryDirectory(prefix='bench_train_py_lockstep_') as work_dir:
                def plain() -> None:
                    lock.start('plain')
                    plain_run(epochs, work_dir, lambda: lock.mark('plain'))
                try:
                    run_paired(lock, plain, lambda: train_py_run(
                        tool, configs[side], osp.join(work_dir, 'mtrain')))
                finally:
                    BenchMarksHook.callbacks = None
            ratios, extra = paired_ratios(lock.epochs['mtrain'], lock.epochs['plain'])
            paired[side][0].extend(ratios)
            paired[side][1].extend(e / PER_EPOCH * 1e6 for e in extra)
            paired[side][2].extend(t / PER_EPOCH * 1e6 for t in lock.epochs['plain'][1:])
    return paired


def report_lockstep(paired: Dict[str, Tuple[List, ...]], args: argparse.Namespace) -> None:
    load = os.getloadavg()
    print(f'# lockstep: tools/train.py and a plain loop in turns of one epoch, {args.rounds} '
          f'rounds of {args.epochs} epochs of {PER_EPOCH} iterations; {args.clock} clock; '
          f'load average {load[0]:.2f} at the end')
    print(f"{'runner':<18} {'pairs':>6} {'ratio':>7} {'(quartiles)':<15} {'vs plain µs/it':>14} "
          f"{'plain µs/it':>11}")
    for side, label in (('epoch', 'EpochBasedRunner'), ('iter', 'IterBasedRunner')):
        ratios, extra, plain = paired[side]
        q1, q2, q3 = statistics.quantiles(ratios, n=4)
        print(f'{label:<18} {len(ratios):6d} {q2:7.3f} ({q1:.3f}-{q3:.3f}) '
              f'{statistics.median(extra):+14.1f} {statistics.median(plain):11.1f}')


def report(runs: Dict[str, List[float]], epochs_median: Dict[str, List[float]],
           args: argparse.Namespace) -> None:
    load = os.getloadavg() if hasattr(os, 'getloadavg') else ('?', )
    print(f'# tools/train.py vs a plain loop: MLP 64-64-10, batch {BATCH}, '
          f'{args.epochs * PER_EPOCH} iterations per run, {args.rounds} rounds, '
          f'{args.clock} clock, torch {torch.__version__}, {torch.get_num_threads()} thread(s); '
          f'load average {load[0]:.2f} at the end')
    for title, times in (('whole runs (runner.run / first batch to the saved checkpoint)', runs),
                         ("each run's median epoch (epochs 2 to the last; no start-up, "
                          'no checkpoint)', epochs_median)):
        print(f'## {title}')
        print(f"{'loop':<18} {'µs/it':>8} {'vs plain':>9} {'ratio':>7}   {'(min-max)':<13} "
              f"{'best µs/it':>10} {'best ratio':>10}")
        plain = times['plain']
        for side, label in (('plain', 'plain loop'), ('epoch', 'EpochBasedRunner'),
                            ('iter', 'IterBasedRunner')):
            values = times[side]
            ratios = [v / p for v, p in zip(values, plain)]
            extra = statistics.median([v - p for v, p in zip(values, plain)])
            print(f'{label:<18} {statistics.median(values):8.1f} {extra:+9.1f} '
                  f'{statistics.median(ratios):7.3f}   ({min(ratios):.3f}-{max(ratios):.3f}) '
                  f'{min(values):10.1f} {min(values) / min(plain):10.3f}')


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--rounds', type=int, default=15, help='interleaved rounds (default 15)')
    parser.add_argument('--epochs', type=int, default=32,
                        help=f'epochs of {PER_EPOCH} iterations per run (default 32)')
    parser.add_argument('--clock', choices=['cpu', 'wall'], default='cpu')
    parser.add_argument('--lockstep', action='store_true',
                        help='run each runner type and the plain loop in turns of one epoch '
                        '(bench/lockstep.py) and pair their epochs')
    parser.add_argument('--epoch-lr-by-iter', action='store_true',
                        help="step the EpochBasedRunner config's LR by iteration (by_epoch=False), "
                        'as the plain loop and the IterBasedRunner config do')
    args = parser.parse_args(argv)
    global EPOCH_SCHEDULE
    EPOCH_SCHEDULE = 'iter' if args.epoch_lr_by_iter else 'epoch'
    torch.set_num_threads(1)
    set_clock(args.clock)
    with tempfile.TemporaryDirectory(prefix='bench_train_py_') as folder:
        if args.lockstep:
            report_lockstep(measure_lockstep(args.rounds, args.epochs, folder), args)
            return 0
        runs, epochs_median = measure(args.rounds, args.epochs, folder)
    report(runs, epochs_median, args)
    return 0


if __name__ == '__main__':
    sys.exit(main())
