"""Machine instructions per iteration through ``tools/train.py``: ``python bench/instructions.py``.

A figure that does not move with the load of a shared machine, finer than
``call_count.py``'s: valgrind's callgrind counts every instruction the
process executes between two marks, and the same code on the same input
gives the same count. Each loop of ``bench/train_py.py`` (the plain loop and
``tools/train.py`` on both runner types) runs in a fresh Python under
callgrind, collecting from the end of its first epoch to the end of its last
(no start-up, no checkpoint; log lines, LR work and epoch starts included),
and the count is divided by the iterations in between.

The marks are two client requests of callgrind's (``callgrind.h``), built
into a tiny C library on first use (needs ``gcc`` and valgrind's headers;
the script says what is missing). ``PYTHONHASHSEED`` is fixed, since the
hash seed alone moves a count by about 1 %. A component's cost is measured
by switching it off (``--drop``): the hook method is put back to the base
class's no-op, so its call is dropped too.

It counts instructions, not time: on the 2-vCPU VM of docs/benchmarks.md
mtrain's own Python ran at about 2 instructions per ns inside the loop and
the plain loop's mix (mostly PyTorch kernels) at about 4, so an instruction
of overhead costs more than the average one. It is the instrument to tell
a 3 µs change from the noise of a shared machine; the ratios to report are
still ``train_py.py --lockstep``'s.

Usage::

    python bench/instructions.py                           # plain, EpochBasedRunner, IterBasedRunner
    python bench/instructions.py --sides iter --drop IterTimerHook.before_iter,after_iter
"""

import argparse
import ctypes
import os
import os.path as osp
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional

BENCH = osp.dirname(osp.abspath(__file__))
MARKS_C = """#include <valgrind/callgrind.h>
void marks_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION;
                         CALLGRIND_TOGGLE_COLLECT; }
void marks_stop(void) { CALLGRIND_TOGGLE_COLLECT; CALLGRIND_DUMP_STATS;
                        CALLGRIND_STOP_INSTRUMENTATION; }
"""


def build_marks(folder: str) -> str:
    """The two marks as a shared library in ``folder``; its path."""
    source, library = osp.join(folder, 'marks.c'), osp.join(folder, 'libmarks.so')
    with open(source, 'w') as f:
        f.write(MARKS_C)
    done = subprocess.run(['gcc', '-O2', '-shared', '-fPIC', source, '-o', library],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f'building the callgrind marks failed (valgrind headers missing? '
                         f'apt install valgrind):\n{done.stderr}')
    return library


def child(side: str, epochs: int, library: str, drop: List[str], lr_by_iter: bool) -> None:
    """In the process callgrind runs: one loop, collected between the marks."""
    import torch
    torch.set_num_threads(1)
    sys.path.insert(0, BENCH)
    import train_py
    import workloads
    train_py.EPOCH_SCHEDULE = 'iter' if lr_by_iter else 'epoch'
    for spec in drop:
        switch_off(spec)
    marks = ctypes.CDLL(library)
    seen = {'epochs': 0}

    def at_epoch_end() -> None:
        seen['epochs'] += 1
        if seen['epochs'] == 1:
            marks.marks_start()
        elif seen['epochs'] == epochs:
            marks.marks_stop()

    with tempfile.TemporaryDirectory(prefix='bench_instructions_') as folder:
        configs = train_py.write_configs(folder, epochs)
        if side == 'plain':
            train_py.plain_run(epochs, folder, at_epoch_end)
        else:
            workloads.BenchMarksHook.callbacks = (lambda: None, at_epoch_end)
            train_py.train_py_run(train_py.load_train_tool(), configs[side],
                                  osp.join(folder, 'work'))


def switch_off(spec: str) -> None:
    """``Class.method,method``: those methods of a hook class (in mtrain.hooks) become no-ops."""
    import mtrain.hooks
    from mtrain.hooks import Hook
    name, methods = spec.split('.', 1)
    cls = getattr(mtrain.hooks, name)
    for method in methods.split(','):
        setattr(cls, method, getattr(Hook, method))


def start(side: str, epochs: int, library: str, drop: List[str], folder: str,
          lr_by_iter: bool) -> subprocess.Popen:
    """``side`` under callgrind, in a fresh Python (the loops run side by side)."""
    env = dict(os.environ, PYTHONHASHSEED='0', OMP_NUM_THREADS='1')
    command = ['valgrind', '--tool=callgrind', '--instr-atstart=no', '--collect-atstart=no',
               f'--callgrind-out-file={osp.join(folder, side)}.callgrind', sys.executable,
               osp.abspath(__file__), '--child', side, '--epochs', str(epochs),
               '--library', library]
    command += [arg for spec in drop for arg in ('--drop', spec)]
    command += ['--epoch-lr-by-iter'] if lr_by_iter else []
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=env)


def per_iteration(run: subprocess.Popen, epochs: int) -> Optional[float]:
    """Instructions per iteration between the marks (None if the run failed)."""
    _, stderr = run.communicate()
    for line in stderr.splitlines():
        if 'Collected :' in line:
            return int(line.split(':')[-1].replace(',', '')) / ((epochs - 1) * 64)
    sys.stderr.write(stderr[-2000:])
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--sides', default='plain,epoch,iter',
                        help='which loops (plain, epoch, iter), comma-separated')
    parser.add_argument('--epochs', type=int, default=3,
                        help='epochs of 64 iterations per run (the first is not counted)')
    parser.add_argument('--drop', action='append', default=[],
                        help='switch hook methods off, e.g. IterTimerHook.before_iter,after_iter')
    parser.add_argument('--epoch-lr-by-iter', action='store_true',
                        help="the EpochBasedRunner config's LR by iteration (train_py.py's flag)")
    parser.add_argument('--child', help=argparse.SUPPRESS)
    parser.add_argument('--library', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.epochs, args.library, args.drop, args.epoch_lr_by_iter)
        return 0
    if shutil.which('valgrind') is None:
        raise SystemExit('valgrind is not installed (apt install valgrind)')
    with tempfile.TemporaryDirectory(prefix='bench_instructions_') as folder:
        library = build_marks(folder)
        runs = {side: start(side, args.epochs, library, args.drop, folder, args.epoch_lr_by_iter)
                for side in args.sides.split(',')}
        counts: Dict[str, Optional[float]] = {side: per_iteration(run, args.epochs)
                                              for side, run in runs.items()}
    plain = counts.get('plain')
    print(f'# instructions per iteration (callgrind), epochs 2-{args.epochs} of 64 iterations'
          + (f'; switched off: {", ".join(args.drop)}' if args.drop else ''))
    for side, value in counts.items():
        extra = '' if plain is None or side == 'plain' or value is None else \
            f'  {value - plain:+10.0f} over plain ({value / plain:.3f})'
        print(f'{side:<6} {value:12.0f}{extra}' if value is not None else f'{side:<6} failed')
    return 0


if __name__ == '__main__':
    sys.exit(main())
