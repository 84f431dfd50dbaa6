"""Evaluate a checkpoint: ``python tools/test.py CONFIG CHECKPOINT [--metrics accuracy]``."""

import argparse
import json
import sys

from mtrain.config import load_config, parse_cfg_options
from mtrain.hooks import EvalHook
from mtrain.registry import MODELS, build
from mtrain.runner import BaseRunner, CheckpointError, build_test_loader
from mtrain.utils import ConfigError, get_logger


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Evaluate a checkpoint on data.test.')
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    parser.add_argument('--metrics', nargs='+', help='metrics (default: evaluation.metric)')
    parser.add_argument('--cfg-options', nargs='+', default=[], metavar='KEY=VALUE')
    parser.add_argument('--trust-checkpoint', action='store_true')
    parser.add_argument('--debug', action='store_true')
    return parser.parse_args(argv)


def evaluate(args: argparse.Namespace) -> dict:
    cfg = load_config(args.config, parse_cfg_options(args.cfg_options))
    logger = get_logger()
    runner = BaseRunner(build(cfg.model, MODELS, 'model'), logger=logger)
    runner.load_checkpoint(args.checkpoint, strict=True, trusted=args.trust_checkpoint)
    metric = args.metrics or (cfg.get('evaluation') or {}).get('metric', 'accuracy')
    results = EvalHook(build_test_loader(cfg), metric=metric).evaluate(runner)
    print(json.dumps(results))
    return results


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        evaluate(args)
    except (ConfigError, CheckpointError) as e:
        if args.debug:
            raise
        print(f'error: {e}', file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main())
