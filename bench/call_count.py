"""Python calls per iteration through ``tools/train.py``: ``python bench/call_count.py``.

A figure that does not move with the load of a shared machine: the number of
function calls (Python functions and C builtins, as ``cProfile`` counts
them) one training iteration makes, for the plain loop and for
``tools/train.py`` on both runner types of ``bench/train_py.py``. Each loop
runs ``--short`` and ``--long`` epochs under the profiler; the difference,
divided by the extra iterations, is the per-iteration count with everything
done once per run (start-up, the checkpoint) taken out, and everything done
per epoch or per log line spread over its iterations.

It counts calls, not time: a call into PyTorch's C++ counts one however long
it runs. It says how much Python each loop runs around the same PyTorch
work, which is what mtrain adds.
"""

import argparse
import contextlib
import cProfile
import os
import pstats
import sys
import tempfile
from typing import Dict, Tuple

import torch

from mtrain.runner import EpochBasedRunner, IterBasedRunner
from train_py import PER_EPOCH, load_train_tool, plain_run, write_configs

Key = Tuple[str, int, str]


def profiled_run(side: str, epochs: int, tool) -> Dict[Key, int]:
    """Calls of each function in one run of ``side`` (mtrain: inside ``runner.run`` only)."""
    profile = cProfile.Profile()
    with tempfile.TemporaryDirectory(prefix='bench_calls_') as folder:
        if side == 'plain':
            profile.runcall(plain_run, epochs, folder)
        else:
            config = write_configs(folder, epochs)[side]
            originals = {cls: cls.__dict__['run'] for cls in (EpochBasedRunner, IterBasedRunner)}
            for cls, run in originals.items():
                cls.run = _profiled(profile, run)
            try:
                with open(os.devnull, 'w') as null, contextlib.redirect_stderr(null):
                    tool.main([config, '--work-dir', os.path.join(folder, 'w'), '--seed', '0'])
            finally:
                for cls, run in originals.items():
                    cls.run = run
    return {key: value[1] for key, value in pstats.Stats(profile).stats.items()}


def _profiled(profile: cProfile.Profile, run):
    def profiled_run_method(self, *args, **kwargs):
        return profile.runcall(run, self, *args, **kwargs)
    return profiled_run_method


def per_iteration(side: str, short: int, long: int, tool) -> Dict[Key, float]:
    profiled_run(side, 1, tool)  # first-call work (imports, caches) out of the counts
    a, b = profiled_run(side, short, tool), profiled_run(side, long, tool)
    iters = (long - short) * PER_EPOCH
    return {k: (b.get(k, 0) - a.get(k, 0)) / iters for k in set(a) | set(b)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--short', type=int, default=2)
    parser.add_argument('--long', type=int, default=6)
    parser.add_argument('--top', type=int, default=0,
                        help='also list the N functions whose calls differ most from the '
                        "plain loop's")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    tool = load_train_tool()
    counts = {side: per_iteration(side, args.short, args.long, tool)
              for side in ('plain', 'epoch', 'iter')}
    plain = sum(counts['plain'].values())
    print(f'# calls per iteration (epochs {args.short} to {args.long}, '
          f'{PER_EPOCH} iterations each)')
    for side, label in (('plain', 'plain loop'), ('epoch', 'EpochBasedRunner'),
                        ('iter', 'IterBasedRunner')):
        total = sum(counts[side].values())
        print(f'{label:<18} {total:7.1f}  {total - plain:+7.1f}')
        if args.top and side != 'plain':
            keys = set(counts[side]) | set(counts['plain'])
            diff = {k: counts[side].get(k, 0) - counts['plain'].get(k, 0) for k in keys}
            top = sorted(diff.items(), key=lambda kv: -abs(kv[1]))[:args.top]
            for (path, line, name), d in top:
                print(f'    {d:+6.2f}  {name} ({path.split("site-packages/")[-1]}:{line})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
