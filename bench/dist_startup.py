"""Time to the first iteration of a 2-process ``tools/dist_train.sh`` run.

Each sample starts ``tools/dist_train.sh CONFIG 2`` and stops it when both
ranks have reached their first iteration (``bench/dist_probe``); the time is
from the start of the script to the later rank's report (wall clock). With
``--compare REV`` the ``dist_train.sh`` of a git revision (e.g. the one that
ran ``train.py --check-config`` first) runs against the same tree, alternating
with today's.

Usage::

    python bench/dist_startup.py --runs 5
    python bench/dist_startup.py configs/digits/lenet_digits.py --runs 5 --compare 88d5f5f
"""

import argparse
import os
import os.path as osp
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def seconds_to_first_iteration(script: str, config: str, work_dir: str) -> float:
    """Run ``script CONFIG 2``; seconds from its start to the later rank's first iteration."""
    env = dict(os.environ, PYTHON=sys.executable, MTRAIN_BENCH_FIRST_ITER='1',
               PYTHONPATH=osp.join(ROOT, 'bench', 'dist_probe'))
    start = time.time()
    out = subprocess.run([script, config, '2', '--work-dir', work_dir], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True).stdout
    reports = [float(line.split()[2]) for line in out.splitlines()
               if line.startswith('FIRST_ITER ')]
    assert len(reports) == 2, out
    return max(reports) - start


def script_at(rev: str) -> str:
    """``tools/dist_train.sh`` of ``rev``, written into tools/ (it finds train.py there)."""
    path = osp.join(ROOT, 'tools', f'.dist_train_{rev}.sh')
    text = subprocess.run(['git', 'show', f'{rev}:tools/dist_train.sh'], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout
    with open(path, 'w') as f:
        f.write(text)
    os.chmod(path, 0o755)
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description='Start-up time of tools/dist_train.sh, 2 ranks.')
    parser.add_argument('config', nargs='?', default='configs/digits/lenet_digits.py')
    parser.add_argument('--runs', type=int, default=5)
    parser.add_argument('--compare', metavar='REV', help="also time REV's dist_train.sh")
    args = parser.parse_args(argv)
    scripts = {'tools/dist_train.sh': osp.join(ROOT, 'tools', 'dist_train.sh')}
    with tempfile.TemporaryDirectory() as work_dir:
        if args.compare:
            scripts[f'{args.compare}:tools/dist_train.sh'] = script_at(args.compare)
        try:
            samples = {name: [] for name in scripts}
            for _ in range(args.runs):
                for name, script in scripts.items():
                    samples[name].append(seconds_to_first_iteration(script, args.config,
                                                                    work_dir))
        finally:
            for name, script in scripts.items():
                if name != 'tools/dist_train.sh':
                    os.remove(script)
    print(f'# {args.config}; 2 ranks; {args.runs} runs; median (min-max) s; '
          f'{os.cpu_count()} CPUs')
    for name, values in samples.items():
        print(f'{name:<40} {statistics.median(values):6.2f} '
              f'({min(values):.2f}-{max(values):.2f})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
