"""Evaluate a checkpoint: ``python tools/test.py CONFIG CHECKPOINT [--metrics accuracy]``."""

import argparse
import json
import sys

import torch
from torch.distributed.elastic.multiprocessing.errors import record

from mtrain.config import load_config, parse_cfg_options
from mtrain.hooks import EvalHook
from mtrain.registry import MODELS, build
from mtrain.runner import BaseRunner, CheckpointError, build_test_loader
from mtrain.utils import (ConfigError, destroy_dist, get_logger, init_dist, is_main_process,
                          report_failure)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Evaluate a checkpoint on data.test.')
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    parser.add_argument('--metrics', nargs='+', help='metrics (default: evaluation.metric)')
    parser.add_argument('--cfg-options', nargs='+', default=[], metavar='KEY=VALUE')
    parser.add_argument('--trust-checkpoint', action='store_true')
    parser.add_argument('--debug', action='store_true')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm'], default='none',
                        help='none (one process), pytorch (torchrun) or slurm (srun): each '
                        'rank scores its share, rank 0 prints the metrics of the whole set')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0,
                        help=argparse.SUPPRESS)  # passed by the legacy torch.distributed.launch
    return parser.parse_args(argv)


def evaluate(args: argparse.Namespace) -> dict:
    cfg = load_config(args.config, parse_cfg_options(args.cfg_options))
    if args.launcher != 'none':
        init_dist(args.launcher, **cfg.get('dist_params', {}))
    logger = get_logger()
    device = cfg.get('device') or ('cuda' if torch.cuda.is_available() else 'cpu')
    runner = BaseRunner(build(cfg.model, MODELS, 'model').to(device), logger=logger)
    runner.load_checkpoint(args.checkpoint, strict=True, trusted=args.trust_checkpoint)
    metric = args.metrics or (cfg.get('evaluation') or {}).get('metric')
    hook = EvalHook(build_test_loader(cfg), **({} if metric is None else {'metric': metric}))
    hook.evaluate(runner, hook.test(runner))  # the evaluation path of training
    results = runner.eval_results
    if is_main_process():
        print(json.dumps(results))
    return results


@record  # under torchrun: this rank's traceback becomes the job's reported root cause
def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        evaluate(args)
    except (ConfigError, CheckpointError) as e:
        report_failure(e)  # distributed: the other ranks stop now, naming this error
        if args.debug:
            raise
        print(f'error: {e}', file=sys.stderr)
        return 2
    except BaseException as e:
        report_failure(e)
        raise
    destroy_dist()
    return 0


if __name__ == '__main__':
    sys.exit(main())
