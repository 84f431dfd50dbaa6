"""How much time mtrain adds to a training loop: ``python bench/overhead.py``.

Trains the same model on the same in-memory data with the same optimizer as a
plain PyTorch loop and as an mtrain config with its default hooks (text logger,
iter timer, NaN guard, LR schedule, checkpoint at the end), and, when it can be
imported, with mmengine's ``Runner``. The loops run in turn (the order rotates
every round) and each figure is the median over the rounds; the ratio is the
median of each round's ratio to the plain loop of the same round.

Usage::

    python bench/overhead.py                     # MLP and ResNet-18, 1 thread, 7 rounds
    python bench/overhead.py --workloads mlp --rounds 11 --threads 2
    python bench/overhead.py --long              # per-iteration cost, first vs last 10k
                                                 # iterations of a 50,000-iteration run
    python bench/overhead.py --workloads resnet50 --device cuda --rounds 5   # GPU, bf16

Results and the machine they were taken on: ``docs/benchmarks.md``.
"""

import argparse
import importlib.util
import os.path as osp
import platform
import statistics
import sys
import tempfile
from typing import Callable, Dict, List, Tuple

import torch
from mmengine.config import Config
from mmengine.logging import MessageHub

from mtrain.runner import build_runner
from workloads import (MIXED_PRECISION, WORKLOADS, bench_logger, clock, close_logger,
                       mtrain_config, plain_loop, rss_bytes, set_clock)

#: Epochs per timed run: 2,048 tiny and MLP iterations, 32 ResNet-18, 64 ResNet-50 iterations.
EPOCHS = {'tiny': 32, 'mlp': 32, 'resnet18': 4, 'resnet50': 8}


def mtrain_run(name: str, epochs: int, work_dir: str,
               marks: Tuple[int, ...] = ()) -> Tuple[float, Dict[int, float], object]:
    """Build the runner from the config (not timed), then time ``runner.run``."""
    cfg = mtrain_config(name, epochs)
    if marks:
        cfg['custom_hooks'] = [dict(type='BenchMarksHook', marks=list(marks))]
    logger = bench_logger(osp.join(work_dir, 'mtrain.log'))
    runner, loaders, workflow = build_runner(Config(cfg), work_dir, logger, seed=0)
    start = clock()
    runner.run(loaders, workflow)
    elapsed = clock() - start
    close_logger(logger)
    probe = next((h for h in runner.hooks if type(h).__name__ == 'BenchMarksHook'), None)
    return elapsed, (probe.times if probe else {}), runner


def available_sides(compare: bool) -> List[str]:
    sides = ['plain', 'mtrain']
    if compare and importlib.util.find_spec('mmengine.runner') is not None:
        sides.append('mmengine')
    return sides


def one_run(side: str, name: str, epochs: int) -> float:
    """Seconds one loop takes to train ``name`` for ``epochs`` epochs, in a fresh work dir."""
    with tempfile.TemporaryDirectory(prefix=f'bench_{side}_') as work_dir:
        if side == 'plain':
            return plain_loop(name, epochs, work_dir)
        if side == 'mtrain':
            return mtrain_run(name, epochs, work_dir)[0]
        from mmengine_loop import mmengine_run  # imported only when compared
        return mmengine_run(name, epochs, work_dir)[0]


def interleaved(name: str, rounds: int, sides: List[str]) -> Dict[str, List[float]]:
    """µs per iteration of each side in each round (after one untimed warm-up run each)."""
    epochs = EPOCHS[name]
    iters = epochs * WORKLOADS[name][3]
    for side in sides:
        one_run(side, name, 1)
    results: Dict[str, List[float]] = {side: [] for side in sides}
    for r in range(rounds):
        order = sides[r % len(sides):] + sides[:r % len(sides)]
        for side in order:
            results[side].append(one_run(side, name, epochs) / iters * 1e6)
    return results


def summary_row(name: str, results: Dict[str, List[float]]) -> List[str]:
    iters, batch = EPOCHS[name] * WORKLOADS[name][3], WORKLOADS[name][2]
    row = [name, str(iters)]
    for side in results:
        median = statistics.median(results[side])
        row += [f'{median:.1f}', f'{batch / median * 1e6:.0f}']
        if side != 'plain':
            ratios = [s / p for s, p in zip(results[side], results['plain'])]
            row.append(f'{statistics.median(ratios):.3f}')
    return row


def print_table(header: List[str], rows: List[List[str]]) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    for line in [header] + rows:
        print('  '.join(str(x).rjust(w) for x, w in zip(line, widths)))


def machine(clock_name: str, device: str) -> str:
    cpu = platform.processor() or 'unknown CPU'
    try:
        with open('/proc/cpuinfo') as f:
            cpu = next(l.split(':', 1)[1].strip() for l in f if l.startswith('model name'))
    except (OSError, StopIteration):
        pass
    if device.startswith('cuda'):
        cpu = f'{torch.cuda.get_device_name(device)} ({cpu})'
        clock_name = 'wall'
    return (f'{cpu}; torch {torch.__version__}, {torch.get_num_threads()} thread(s); '
            f'Python {platform.python_version()}; {clock_name} clock')


def run_short(args: argparse.Namespace) -> None:
    sides = available_sides(args.compare)
    print(f'# {machine(args.clock, args.device)}; {args.rounds} rounds, medians')
    header = ['workload', 'iters/run', 'plain µs/it', 'img/s', 'mtrain µs/it', 'img/s',
              'mtrain/plain']
    if 'mmengine' in sides:
        header += ['mmengine µs/it', 'img/s', 'mmengine/plain']
    rows = []
    for name in args.workloads:
        # The mmengine side has no bf16 + channels_last set-up: not compared on those.
        own = [s for s in sides if s != 'mmengine' or name not in MIXED_PRECISION]
        row = summary_row(name, interleaved(name, args.rounds, own))
        rows.append(row + ['-'] * (len(header) - len(row)))
    print_table(header, rows)
    if not any(importlib.util.find_spec(n) for n in ('lightning', 'pytorch_lightning')):
        print('# Lightning is not installed: no Lightning comparison.')


def long_side(side: str, epochs: int, marks: Tuple[int, ...]) -> Tuple[Dict, Dict, int]:
    """One long run: clock readings and resident memory at ``marks``, and logged values held."""
    with tempfile.TemporaryDirectory(prefix=f'bench_long_{side}_') as work_dir:
        if side == 'plain':
            times, rss = {0: clock()}, {0: rss_bytes()}
            plain_loop('mlp', epochs, work_dir, on_iter=_recorder(marks, times, rss))
            return times, rss, 0
        if side == 'mtrain':
            _, times, runner = mtrain_run('mlp', epochs, work_dir, marks)
            probe = next(h for h in runner.hooks if type(h).__name__ == 'BenchMarksHook')
            held = sum(len(runner.log_buffer.pending(k)) for k in list(runner.log_buffer._values))
            return times, probe.rss, held
        from mmengine_loop import mmengine_run  # imported only when compared
        _, times, rss = mmengine_run('mlp', epochs, work_dir, marks)
        hub = MessageHub.get_current_instance()  # the peer's history buffers
        held = sum(len(buf.data[0]) for buf in hub.log_scalars.values())
        return times, rss, held


def _recorder(marks: Tuple[int, ...], times: Dict, rss: Dict) -> Callable[[int], None]:
    wanted = set(marks)

    def on_iter(it: int) -> None:
        if it in wanted:
            times[it] = clock()
            rss[it] = rss_bytes()
    return on_iter


def run_long(args: argparse.Namespace) -> None:
    per_epoch = WORKLOADS['mlp'][3]
    epochs = -(-args.long_iters // per_epoch)
    total = epochs * per_epoch
    marks = (10_000, total - 10_000, total)
    print(f'# {machine(args.clock, args.device)}; MLP, {total} iterations per run, '
          'one run per loop')
    header = ['loop', 'first 10k µs/it', 'last 10k µs/it', 'last/first', 'RSS growth MiB',
              'logged values held']
    rows = []
    for side in available_sides(args.compare):
        times, rss, held = long_side(side, epochs, marks)
        first = (times[10_000] - times[0]) / 10_000 * 1e6
        last = (times[total] - times[total - 10_000]) / 10_000 * 1e6
        growth = (rss[total] - rss[10_000]) / 2**20 if rss else float('nan')
        rows.append([side, f'{first:.1f}', f'{last:.1f}', f'{last / first:.3f}',
                     f'{growth:.1f}', str(held)])
    print_table(header, rows)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--workloads', nargs='+', default=['mlp', 'resnet18'],
                        choices=list(WORKLOADS))
    parser.add_argument('--rounds', type=int, default=7, help='interleaved rounds (default 7)')
    parser.add_argument('--threads', type=int, default=1,
                        help='torch.set_num_threads (default 1: steadiest on a shared CPU)')
    parser.add_argument('--clock', choices=['cpu', 'wall'], default='cpu',
                        help='time with process CPU time (default; steady on a shared machine) '
                        'or the wall clock (always the wall clock on a GPU)')
    parser.add_argument('--device', default='cpu',
                        help="'cpu' (default) or 'cuda' (for the resnet50 workload)")
    parser.add_argument('--no-compare', dest='compare', action='store_false',
                        help='skip the mmengine Runner comparison')
    parser.add_argument('--long', action='store_true',
                        help='first vs last 10,000 iterations of a long MLP run')
    parser.add_argument('--long-iters', type=int, default=50_000)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    set_clock(args.clock, args.device)
    (run_long if args.long else run_short)(args)
    return 0


if __name__ == '__main__':
    sys.exit(main())
