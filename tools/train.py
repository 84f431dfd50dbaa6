"""Train from a config: ``python tools/train.py configs/digits/lenet_digits.py``."""

import argparse
import json
import logging
import os
import os.path as osp
import random
import shlex
import shutil
import signal
import sys
import time
from typing import Any, Dict, List, Optional

from torch.distributed.elastic.multiprocessing.errors import record

from mtrain.config import load_config, parse_cfg_options, source_of
from mtrain.hooks import EvalHook, NonFiniteLossError
from mtrain.config_checks import check_checkpoint_path
from mtrain.parallel import unwrap
from mtrain.runner import CheckpointError, Preempted, build_runner
from mtrain.runner.dry_run import dry_run
from mtrain.step import OutOfMemoryStop
from mtrain.utils.mistakes import announce_mistake
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
    parser.add_argument('--check-config', action='store_true',
                        help='build everything training builds (model, datasets, optimizer, '
                        'hooks, load_from), run one train batch (no update) and one val batch, '
                        'then exit')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm'], default='none',
                        help='how the processes were started: none (one process), pytorch '
                        '(torchrun, see tools/dist_train.sh) or slurm (srun, see '
                        'tools/slurm_train.sh)')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0,
                        help=argparse.SUPPRESS)  # passed by the legacy torch.distributed.launch
    return parser.parse_args(argv)


def resolve_work_dir(args: argparse.Namespace, cfg) -> str:
    """``--work-dir``, else the config's ``work_dir``, else ``work_dirs/<config name>``."""
    return args.work_dir or cfg.get('work_dir') or osp.join(
        'work_dirs', osp.splitext(osp.basename(args.config))[0])


def train(args: argparse.Namespace) -> None:
    cfg = load_config(args.config, parse_cfg_options(args.cfg_options))
    work_dir = args.work_dir = resolve_work_dir(args, cfg)  # the resume hint names it
    apply_run_arguments(args, cfg)
    if args.check_config:
        check_whole_config(args, cfg, work_dir)
        return
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
    deterministic = bool(args.deterministic or cfg.get('deterministic', False))
    set_random_seed(seed, deterministic=deterministic)
    logger.info(f'Set random seed to {seed}, deterministic: {deterministic}')
    runner, loaders, workflow = build(args, cfg, work_dir, logger, seed, distributed)
    runner.timestamp = timestamp
    train_loader = loaders[[mode for mode, _ in workflow].index('train')]
    try:  # in the .log.json meta line: plot_curve's epoch length
        runner.meta['iters_per_epoch'] = len(train_loader)
    except TypeError:  # an iterable-style dataset
        pass
    runner.stop_on_signals()
    runner.run(loaders, workflow)
    if is_main_process():
        for line in summary_lines(runner, args):
            logger.info(line)


def apply_run_arguments(args: argparse.Namespace, cfg) -> None:
    """``--resume-from``, ``--load-from``, ``--auto-resume`` into ``cfg``; checkpoint paths checked."""
    for key, value in (('resume_from', args.resume_from), ('load_from', args.load_from)):
        if value is not None:
            cfg[key] = value
        try:
            check_checkpoint_path(cfg.get(key), key)
        except ConfigError as e:
            flag = f"--{key.replace('_', '-')}"
            raise e.with_file(flag if value is not None else source_of(
                key, parse_cfg_options(args.cfg_options), args.config))
    if args.auto_resume:
        cfg.auto_resume = True


def build(args: argparse.Namespace, cfg, work_dir: str, logger, seed: int, distributed: bool):
    """``build_runner``; a config error names the file (or ``--cfg-options``) it came from."""
    try:
        return build_runner(cfg, work_dir, logger, seed=seed, distributed=distributed,
                            validate=not args.no_validate, trust_checkpoint=args.trust_checkpoint)
    except ConfigError as e:
        raise e.with_file(source_of(e.key, parse_cfg_options(args.cfg_options), args.config))


def check_whole_config(args: argparse.Namespace, cfg, work_dir: str) -> None:
    """``--check-config``: build everything training builds, run one batch each way, no update.

    The model, datasets, loaders, optimizer, hooks and the preflight checks,
    ``load_from`` (or the checkpoint a resume would read) loaded, one train
    batch through the model without an update and one val batch through the
    evaluation path (``mtrain.runner.dry_run``). Nothing is written but the
    work dir itself.
    """
    logger = get_logger()
    level = logger.level
    logger.setLevel(logging.WARNING)  # the build's own info lines are for a real run
    try:
        seed = args.seed if args.seed is not None else cfg.get('seed', 0)
        runner, loaders, workflow = build(args, cfg, work_dir, logger, seed, distributed=False)
        ran = dry_run(runner, loaders, workflow)
    finally:
        logger.setLevel(level)
    evaluates = any(isinstance(h, EvalHook) for h in runner.hooks)
    phases = ', '.join(f'{mode}' for mode, _ in workflow) + (', evaluation' if evaluates else '')
    print(f'config check passed: built {type(unwrap(runner.model)).__name__}, its optimizer, '
          f'{len(runner.hooks)} hooks and the data of {phases}; ran '
          f"{' and '.join(ran) or 'no batch'}")


def summary_lines(runner, args: argparse.Namespace) -> List[str]:
    """The last lines of a run: where it went, how it ended, what to do next."""
    lines = [f'Finished: epoch {runner.epoch}, iteration {runner.iter}. '
             f'Work dir: {runner.work_dir}']
    log_json = next((h.json_log_path for h in runner.hooks
                     if getattr(h, 'json_log_path', None)), None)
    eval_hook = next((h for h in runner.hooks if isinstance(h, EvalHook)), None)  # or Dist...
    evals = val_records(log_json)
    lines += metric_lines(evals, getattr(eval_hook, 'save_best', None), runner.max_epochs)
    if getattr(eval_hook, 'best_ckpt_path', None):
        lines.append(f'  best checkpoint ({eval_hook.save_best}): {eval_hook.best_ckpt_path}')
    latest = osp.join(runner.work_dir, 'latest.pth')
    if osp.exists(latest):
        lines.append(f'  last checkpoint: {osp.realpath(latest)}')
        longer = 'runner.max_epochs' if runner.max_epochs else 'runner.max_iters'
        lines.append('  train longer: ' + resume_command(args, {longer: '<more>'}))
    if log_json:
        first = [k for k, _ in _metrics(evals[-1])][:1] if evals else []
        lines.append(f"  plot: python {_tool('analyze_logs.py')} plot_curve {log_json} "
                     f"--keys {' '.join(['loss'] + first)} --out curves.png")
    return lines


def metric_lines(evals: List[Dict[str, Any]], save_best: Optional[str],
                 by_epoch: Any) -> List[str]:
    """The last evaluation (up to 6 values) and the best value of one metric.

    The metric is the one ``save_best`` follows, else the first one logged.
    """
    metrics = _metrics(evals[-1]) if evals else []
    if not metrics:
        return []
    shown = ', '.join(f'{k} {_fmt(v)}' for k, v in metrics[:6])
    lines = [f"  last evaluation: {shown}{', ...' if len(metrics) > 6 else ''}"]
    key = save_best if save_best in evals[-1] else metrics[0][0]
    best = max(evals, key=lambda r: _score(key, r))
    where = f"epoch {best['epoch']}" if by_epoch else f"iteration {best['iter']}"
    return lines + [f'  best {key}: {_fmt(best.get(key))} at {where}']


def val_records(log_json: Optional[str]) -> List[Dict[str, Any]]:
    """The evaluation lines of a ``.log.json`` (empty if there is none).

    A ``('val', N)`` workflow phase writes ``val`` lines too, its losses
    with ``time``/``data_time``; those are not evaluations.
    """
    if not log_json or not osp.isfile(log_json):
        return []
    with open(log_json) as f:
        records = [json.loads(text) for text in f if text.strip()]
    return [r for r in records if r.get('mode') == 'val' and 'time' not in r
            and 'data_time' not in r]


def _metrics(record: Dict[str, Any]) -> List[Any]:
    return [(k, v) for k, v in record.items()
            if k not in ('mode', 'epoch', 'iter', 'lr', 'memory', 'time', 'data_time')
            and isinstance(v, (int, float)) and not isinstance(v, bool)]


def _score(key: str, record: Dict[str, Any]) -> float:
    """Higher is better, except for losses and errors (mmcv 1.x EvalHook's rule by name)."""
    value = record.get(key)
    if not isinstance(value, (int, float)):
        return float('-inf')
    return -value if 'loss' in key or 'err' in key else value


def _fmt(value: Any) -> str:
    return f'{value:.4f}' if isinstance(value, float) else str(value)


def resume_command(args: argparse.Namespace, override: Optional[Dict[str, str]] = None) -> str:
    """The command that continues *this* run: its arguments, its work dir, ``--auto-resume``.

    ``override`` replaces or adds ``--cfg-options`` (e.g. a longer schedule).
    Under torchrun on one node the command is ``tools/dist_train.sh``'s.
    """
    argv = ['--work-dir', args.work_dir]
    for flag in ('load_from', 'seed'):
        if getattr(args, flag) is not None:
            argv += [f'--{flag.replace("_", "-")}', str(getattr(args, flag))]
    argv += [f'--{f.replace("_", "-")}' for f in ('no_validate', 'deterministic',
                                                   'trust_checkpoint') if getattr(args, f)]
    argv.append('--auto-resume')
    override = override or {}
    options = [o for o in args.cfg_options if o.split('=', 1)[0] not in override]
    options += [f'{k}={v}' for k, v in override.items()]
    if options:
        argv += ['--cfg-options', *options]
    nproc = os.environ.get('LOCAL_WORLD_SIZE')
    if args.launcher == 'pytorch' and nproc and nproc == os.environ.get('WORLD_SIZE'):
        return shlex.join([_tool('dist_train.sh'), args.config, nproc, *argv])
    launcher = ['--launcher', args.launcher] if args.launcher != 'none' else []
    return shlex.join([_python(), _tool('train.py'), args.config, *launcher, *argv])


def _tool(name: str) -> str:
    """This tools/ script, relative to the current directory when it is below it."""
    path = osp.join(osp.dirname(osp.abspath(__file__)), name)
    return path if osp.relpath(path).startswith('..') else osp.relpath(path)


def _python() -> str:
    """``python`` when that is this interpreter, else the interpreter's full path."""
    found = shutil.which('python')
    if found and osp.realpath(found) == osp.realpath(sys.executable):
        return 'python'
    return sys.executable


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
        if args.check_config:
            return 0
    except (ConfigError, CheckpointError) as e:
        if args.debug:
            report_failure(e)
            raise
        announce_mistake(e, args.launcher)
        return 2
    except (NonFiniteLossError, OutOfMemoryStop) as e:  # the run's own end, in one line
        report_failure(e)
        print(f'error: {e}', file=sys.stderr)
        return 1
    except Preempted as e:  # every rank got the signal: each stops on its own
        where = f'; checkpoint saved to {e.checkpoint}' if e.checkpoint else ''
        if is_main_process():
            print(f'training stopped by {e.signal_name} after iteration {e.iteration}{where}.\n'
                  f'Resume this run with:\n  {resume_command(args)}', file=sys.stderr)
        return 128 + signal.Signals[e.signal_name].value
    except BaseException as e:
        report_failure(e)
        raise
    destroy_dist()
    return 0


if __name__ == '__main__':
    sys.exit(main())
