"""Train from a config: ``python tools/train.py configs/digits/lenet_digits.py``."""

import argparse
import os
import os.path as osp
import random
import signal
import sys
import time

from torch.distributed.elastic.multiprocessing.errors import record

from mtrain.config import load_config, parse_cfg_options
from mtrain.hooks import NonFiniteLossError
from mtrain.runner import CheckpointError, Preempted, build_runner
from mtrain.utils import (ConfigError, broadcast_object, destroy_dist, get_logger, init_dist,
                          is_main_process, report_failure, set_random_seed)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Train a model from an mtrain config.')
    parser.add_argument('config', help='config file path')
    parser.add_argument('--work-dir', help='where logs and checkpoints go '
                        '(default: work_dirs/<config name>)')
    parser.add_argument('--resume-from', help='checkpoint to continue exactly from')
    parser.add_argument('--auto-resume', action='store_true',
                        help='continue from the newest valid checkpoint in the work dir')
    parser.add_argument('--load-from', help='checkpoint whose weights to start from')
    parser.add_argument('--no-validate', action='store_true', help='skip evaluation hooks')
    parser.add_argument('--seed', type=int, help='random seed (default: cfg.seed or random)')
    parser.add_argument('--deterministic', action='store_true',
                        help='deterministic algorithms (slower)')
    parser.add_argument('--cfg-options', nargs='+', default=[], metavar='KEY=VALUE',
                        help='override config keys, e.g. optimizer.lr=0.01 custom_hooks.0.priority=30')
    parser.add_argument('--trust-checkpoint', action='store_true',
                        help='allow loading checkpoints that hold arbitrary pickled objects '
                        '(only for files you trust: loading them can run code)')
    parser.add_argument('--debug', action='store_true', help='show tracebacks for config errors')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm'], default='none',
                        help='how the processes were started: none (one process), pytorch '
                        '(torchrun, see tools/dist_train.sh) or slurm (srun, see '
                        'tools/slurm_train.sh)')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0,
                        help=argparse.SUPPRESS)  # passed by the legacy torch.distributed.launch
    return parser.parse_args(argv)


def train(args: argparse.Namespace) -> None:
    cfg = load_config(args.config, parse_cfg_options(args.cfg_options))
    work_dir = args.work_dir or cfg.get('work_dir') or osp.join(
        'work_dirs', osp.splitext(osp.basename(args.config))[0])
    for key, value in (('resume_from', args.resume_from), ('load_from', args.load_from)):
        if value is not None:
            cfg[key] = value
    if args.auto_resume:
        cfg.auto_resume = True
    distributed = args.launcher != 'none'
    if distributed:  # before anything is built: the rank decides the GPU and the logging
        init_dist(args.launcher, **cfg.get('dist_params', {}))
    prepare_work_dir(work_dir)
    if is_main_process():
        cfg.dump(osp.join(work_dir, osp.basename(args.config)))
    timestamp = time.strftime('%Y%m%d_%H%M%S', time.localtime())
    logger = get_logger(log_file=osp.join(work_dir, f'{timestamp}.log'))
    seed = args.seed if args.seed is not None else cfg.get('seed')
    if seed is None:
        seed = broadcast_object(random.randint(0, 2**31 - 1))  # one seed for all ranks
    set_random_seed(seed, deterministic=args.deterministic or cfg.get('deterministic', False))
    logger.info(f'Set random seed to {seed}, deterministic: {args.deterministic}')
    try:
        runner, loaders, workflow = build_runner(cfg, work_dir, logger, seed=seed,
                                                 distributed=distributed,
                                                 validate=not args.no_validate,
                                                 trust_checkpoint=args.trust_checkpoint)
    except ConfigError as e:
        raise e.with_file(args.config)
    runner.timestamp = timestamp
    runner.stop_on_signals()
    runner.run(loaders, workflow)


def prepare_work_dir(work_dir: str) -> None:
    """Create the work dir and prove it is writable before any training starts."""
    try:
        os.makedirs(work_dir, exist_ok=True)
        probe = osp.join(work_dir, f'.write-test-{os.getpid()}')
        with open(probe, 'wb') as f:
            f.write(b'\0' * 4096)
            f.flush()
            os.fsync(f.fileno())
        os.remove(probe)
    except OSError as e:
        raise ConfigError(f'the work dir {work_dir} is not writable ({e.strerror}); choose '
                          'another with --work-dir or free some space', key='work_dir') from e


@record  # under torchrun: this rank's traceback becomes the job's reported root cause
def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        train(args)
    except (ConfigError, CheckpointError) as e:
        report_failure(e)  # distributed: the other ranks stop now, naming this error
        if args.debug:
            raise
        print(f'error: {e}\n(run with --debug for the traceback)', file=sys.stderr)
        return 2
    except NonFiniteLossError as e:
        report_failure(e)
        print(f'error: {e}', file=sys.stderr)
        return 1
    except Preempted as e:  # every rank got the signal: each stops on its own
        print(str(e).replace('CONFIG', args.config), file=sys.stderr)
        return 128 + signal.Signals[e.signal_name].value
    except BaseException as e:
        report_failure(e)
        raise
    destroy_dist()
    return 0


if __name__ == '__main__':
    sys.exit(main())
