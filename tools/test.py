"""Evaluate a checkpoint: ``python tools/test.py CONFIG CHECKPOINT [--metrics accuracy]``.

As mmdet 2.x's ``tools/test.py``: ``--out results.pkl`` keeps the raw
per-sample results (what ``dataset.evaluate`` receives), ``--eval-options
key=value`` passes arguments to ``dataset.evaluate`` (or ``format_results``)
over those of the config's ``evaluation`` that training passed to it,
``--format-only`` writes the results in the dataset's submission format
(``dataset.format_results``) without scoring them.
"""

import argparse
import json
import os
import os.path as osp
import pickle
import sys
from typing import Any, Dict

import torch
from torch.distributed.elastic.multiprocessing.errors import record

from mtrain.config import load_config, parse_cfg_options
from mtrain.hooks import DistEvalHook, EvalHook
from mtrain.hooks.eval_checks import dataset_eval_kwargs
from mtrain.registry import HOOKS, MODELS, build
from mtrain.runner import BaseRunner, CheckpointError, build_test_loader
from mtrain.utils import (ConfigError, destroy_dist, get_logger, init_dist, is_main_process,
                          report_failure)
from mtrain.utils.mistakes import announce_mistake


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Evaluate a checkpoint on data.test.')
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    parser.add_argument('--metrics', nargs='+', help='metrics (default: evaluation.metric)')
    parser.add_argument('--out', help='write the raw results to this pickle file (.pkl)')
    parser.add_argument('--eval-options', nargs='+', default=[], metavar='KEY=VALUE',
                        help='arguments of dataset.evaluate (or of format_results with '
                        '--format-only), e.g. jsonfile_prefix=./results')
    parser.add_argument('--format-only', action='store_true',
                        help='only write the results in the format of dataset.format_results '
                        '(e.g. for a test server), without evaluating them')
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
    check_arguments(args)
    cfg = load_config(args.config, parse_cfg_options(args.cfg_options))
    if args.launcher != 'none':
        init_dist(args.launcher, **cfg.get('dist_params', {}))
    logger = get_logger()
    device = cfg.get('device') or ('cuda' if torch.cuda.is_available() else 'cpu')
    runner = BaseRunner(build(cfg.model, MODELS, 'model').to(device), logger=logger)
    runner.load_checkpoint(args.checkpoint, strict=True, trusted=args.trust_checkpoint)
    eval_options = parse_cfg_options(args.eval_options)
    options = dict(eval_options) if args.format_only else evaluate_arguments(cfg, args)
    try:
        hook = EvalHook(build_test_loader(cfg), **({} if args.format_only else options))
    except ConfigError as e:
        raise e.with_file('--eval-options' if (e.key or '').split('.')[-1] in eval_options
                          else args.config)
    results = hook.test(runner)  # the evaluation path of training: all ranks
    if is_main_process():
        if args.out:
            dump_results(results, args.out)
        if args.format_only:
            format_results(hook.dataloader.dataset, results, options)
    if args.format_only:
        return {}
    results = hook.score_and_share(runner, results)  # rank 0 scores (as mmcv), all ranks get it
    if is_main_process():
        print(json.dumps(results))
    return results


def evaluate_arguments(cfg, args: argparse.Namespace) -> Dict[str, Any]:
    """What ``dataset.evaluate`` gets: the training run's, then ``--eval-options``, ``--metrics``.

    The training run's are the ``evaluation`` keys its hook passes on (``topk``,
    ``iou_thr``, ``metric``...; not ``interval``, ``save_best``...), so a
    checkpoint scores here what its run's evaluation logged.
    """
    evaluation = dict(cfg.get('evaluation') or {})
    hook_type = evaluation.get('type', 'EvalHook')
    configured = HOOKS.get(hook_type) if isinstance(hook_type, str) else hook_type
    hooks = [EvalHook, DistEvalHook] + ([configured] if isinstance(configured, type) else [])
    options = {**dataset_eval_kwargs(evaluation, hooks), **parse_cfg_options(args.eval_options)}
    if args.metrics:
        options['metric'] = args.metrics
    return options


def check_arguments(args: argparse.Namespace) -> None:
    """``--out`` names a pickle file; ``--format-only`` takes no ``--metrics``."""
    if args.out is not None and not args.out.endswith(('.pkl', '.pickle')):
        raise ConfigError(f'--out {args.out}: the raw results are written as a pickle; name a '
                          '.pkl file', key='--out')
    if args.format_only and args.metrics:
        raise ConfigError('--format-only writes the results without evaluating them; leave out '
                          '--metrics, or --format-only', key='--format-only')


def dump_results(results: Any, path: str) -> None:
    """The raw results (a tensor's rows as numpy arrays, one per sample) into ``path``."""
    if isinstance(results, torch.Tensor):
        results = list(results.numpy())
    if osp.dirname(path):
        os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, 'wb') as f:
        pickle.dump(results, f)
    print(f'wrote {len(results)} results to {path}', file=sys.stderr)


def format_results(dataset: Any, results: Any, options: Dict[str, Any]) -> None:
    """``dataset.format_results(results, **options)``, as mmdet 2.x's ``--format-only``."""
    method = getattr(dataset, 'format_results', None)
    if not callable(method):
        raise ConfigError(f'--format-only: the test dataset {type(dataset).__name__} has no '
                          'format_results(results, **kwargs) method; add one, or leave out '
                          '--format-only', key='--format-only')
    method(results, **options)


@record  # under torchrun: this rank's traceback becomes the job's reported root cause
def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        evaluate(args)
    except (ConfigError, CheckpointError) as e:
        if args.debug:
            report_failure(e)  # distributed: the other ranks stop now, naming this error
            raise
        announce_mistake(e, args.launcher)  # one line for the whole job
        return 2
    except BaseException as e:
        report_failure(e)
        raise
    destroy_dist()
    return 0


if __name__ == '__main__':
    sys.exit(main())
