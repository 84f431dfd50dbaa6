"""Search config overrides with Optuna; each trial is a ``tools/train.py`` run (docs/sweeps.md).

``python tools/sweep.py configs/digits/lenet_digits.py --space configs/digits/lr_space.py``
"""

import argparse
import os.path as osp
import sys

from mtrain.config import load_config, parse_cfg_options
from mtrain.hooks.optuna_pruning import PRUNERS
from mtrain.sweep import SweepSpec, default_metric, load_space, run_sweep
from mtrain.sweep.forkserver import ForkServer
from mtrain.sweep.study import SAMPLERS
from mtrain.utils import ConfigError

TRAIN_SCRIPT = osp.join(osp.dirname(osp.abspath(__file__)), 'train.py')


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Hyperparameter sweep over config overrides.')
    parser.add_argument('config', help='the training config')
    parser.add_argument('--space', required=True,
                        help="search space file: space = {'optimizer.lr': loguniform(1e-3, 0.3)}")
    parser.add_argument('--trials', type=int, default=20,
                        help='trials the study is to have in all, counting earlier runs of '
                        'this command (default 20)')
    parser.add_argument('--work-dir', help='where trials, the database and the results go '
                        '(default: work_dirs/<config name>_sweep)')
    parser.add_argument('--storage', help='Optuna storage URL, e.g. postgresql://user@host/db '
                        '(default: sqlite:///<work dir>/sweep.db)')
    parser.add_argument('--study', help='study name (default: the config name)')
    parser.add_argument('--jobs', type=int, default=1,
                        help='trials at a time on this machine (threads divided among them)')
    parser.add_argument('--metric', help='evaluation metric to optimize (default: '
                        'evaluation.save_best or evaluation.metric)')
    parser.add_argument('--direction', choices=['max', 'min'],
                        help="default: evaluation.rule ('less': min) for the save_best "
                        'metric, else from the name as mmcv 1.x (acc, mAP, ...: max; loss: min)')
    parser.add_argument('--pruner', choices=list(PRUNERS), default='median')
    parser.add_argument('--pruner-args', nargs='+', default=[], metavar='KEY=VALUE',
                        help='keyword arguments of the pruner, e.g. n_startup_trials=2')
    parser.add_argument('--sampler', choices=list(SAMPLERS), default='tpe')
    parser.add_argument('--seed', type=int, help="every trial's training seed and the "
                        "sampler's (default: the config's seed, else 0)")
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm'], default='none',
                        help='pytorch: each trial is a torchrun DDP run of --gpus-per-trial '
                        'processes; slurm: an srun job step of --gpus-per-trial tasks')
    parser.add_argument('--gpus-per-trial', type=int, default=1)
    parser.add_argument('--partition', help='slurm: the partition (srun -p)')
    parser.add_argument('--gpus-per-node', type=int,
                        help='slurm: tasks and GPUs per node (default: min(gpus-per-trial, 8))')
    parser.add_argument('--cpus-per-task', type=int, default=5,
                        help='slurm: CPUs per task, also its OMP_NUM_THREADS (default 5)')
    parser.add_argument('--srun-args', default='',
                        help='slurm: more srun arguments, e.g. "--qos=high --time=2:00:00"')
    parser.add_argument('--cfg-options', nargs='+', default=[], metavar='KEY=VALUE',
                        help='overrides every trial gets, e.g. runner.max_epochs=3')
    parser.add_argument('--no-plots', action='store_true',
                        help="skip Optuna's plots at the end (a few seconds; e.g. for all "
                        'but one of many workers; --trials 0 draws them later)')
    parser.add_argument('--no-fork', action='store_true',
                        help='start each trial as a fresh python process (default: a fork of '
                        'a process that imported the training code once; docs/sweeps.md)')
    parser.add_argument('--debug', action='store_true', help='show tracebacks for errors')
    return parser.parse_args(argv)


def build_spec(args: argparse.Namespace) -> SweepSpec:
    """The sweep the arguments describe (the SPACE file read, defaults filled in)."""
    name = osp.splitext(osp.basename(args.config))[0]
    fixed = parse_cfg_options(args.cfg_options)
    metric, direction = default_metric(args.config, args.metric, args.direction, fixed)
    if args.seed is None:
        args.seed = load_config(args.config, fixed).get('seed') or 0
    return SweepSpec(
        config=args.config, space_file=args.space, space=load_space(args.space),
        work_dir=args.work_dir or osp.join('work_dirs', f'{name}_sweep'), trials=args.trials,
        study=args.study or name, metric=metric, direction=direction, storage=args.storage,
        sampler=args.sampler, pruner=args.pruner,
        pruner_args=parse_cfg_options(args.pruner_args), seed=args.seed, jobs=args.jobs,
        launcher=args.launcher, gpus_per_trial=args.gpus_per_trial, partition=args.partition,
        gpus_per_node=args.gpus_per_node, cpus_per_task=args.cpus_per_task,
        srun_args=args.srun_args,
        train_script=TRAIN_SCRIPT,
        cfg_options=list(args.cfg_options), plots=not args.no_plots)


def main(argv=None, fork: bool = False) -> int:
    """The command; ``fork``: start the trials' fork server (only as the process's first act)."""
    args = parse_args(argv)
    forks = None
    if fork and not args.no_fork and args.launcher == 'none':
        forks = ForkServer.start(TRAIN_SCRIPT)  # before this process computes anything
    try:
        return run_sweep(build_spec(args), lambda line: print(line, flush=True), forks)
    except ConfigError as e:
        if args.debug:
            raise
        print(f'error: {e}', file=sys.stderr)
        return 2
    finally:
        if forks is not None:
            forks.close()


if __name__ == '__main__':
    sys.exit(main(fork=True))
