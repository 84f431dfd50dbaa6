"""Start-up time: ``python tools/train.py CONFIG`` to its first iteration, vs ``import torch``.

Each sample is a fresh process, timed from just before it is started to the
moment it reports (wall clock): ``python -c "import torch"`` reports once torch
is imported; the next baseline also builds a torch optimizer, which imports
``torch._dynamo`` (seconds on a slow disk) in any PyTorch script; the training
run reports when the runner starts its first iteration
(``bench/first_iter_probe.py`` stops it there). The runs alternate and
the medians are printed, with the import cost of the libraries mtrain loads
lazily, measured the same way.

Usage::

    python bench/startup.py                                   # the digits config, 5 runs
    python bench/startup.py configs/digits/lenet_digits.py --runs 9
"""

import argparse
import os
import os.path as osp
import statistics
import subprocess
import sys
import tempfile
import time
from typing import List

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
PROBE = osp.join(ROOT, 'bench', 'first_iter_probe.py')


def seconds_to_report(cmd: List[str]) -> float:
    """Seconds from starting ``cmd`` to the wall-clock time it prints on its last line."""
    start = time.time()
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return float(out.strip().splitlines()[-1]) - start


# Any PyTorch training script pays this: torch.optim's constructors import torch._dynamo.
OPTIMIZER = 'import torch; torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)'


def python_c(code: str) -> List[str]:
    return [sys.executable, '-c', f'{code}\nimport time; print(time.time())']


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description='Start-up time of tools/train.py.')
    parser.add_argument('config', nargs='?', default='configs/digits/lenet_digits.py')
    parser.add_argument('--runs', type=int, default=5)
    args = parser.parse_args(argv)
    commands = {'import torch': python_c('import torch'),
                'import torch; build an SGD optimizer': python_c(OPTIMIZER),
                'train.py to first iteration': None}
    samples = {name: [] for name in commands}
    with tempfile.TemporaryDirectory() as work_dir:
        commands['train.py to first iteration'] = [sys.executable, PROBE, args.config,
                                                   '--work-dir', work_dir]
        for _ in range(args.runs):
            for name, cmd in commands.items():
                samples[name].append(seconds_to_report(cmd))
    for extra in ('mmengine', 'tensorboard', 'tqdm', 'matplotlib.pyplot', 'sklearn.datasets',
                  'torchvision'):
        key = f'import torch, {extra}'
        samples[key] = [seconds_to_report(python_c(f'import torch, {extra}'))
                        for _ in range(max(3, args.runs // 2))]
    base = statistics.median(samples['import torch'])
    print(f'# {args.config}; {args.runs} runs; medians (s); {os.cpu_count()} CPUs')
    for name, values in samples.items():
        median = statistics.median(values)
        extra = '' if name == 'import torch' else f'   (+{median - base:.2f} s over import torch)'
        print(f'{name:<38} {median:6.2f}{extra}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
