"""A whole sweep: check everything, run the trials, write the results.

``tools/sweep.py`` is a thin command line over :func:`run_sweep`.
"""

import os
import os.path as osp
import shutil
import signal
from typing import Any, Callable, Dict, Optional, Tuple

from ..config import load_config
from ..defaults import metric_rule
from ..hooks.optuna_pruning import build_pruner
from ..utils import ConfigError
from .claims import sweep_lock
from .forkserver import ForkServer
from .report import format_table, save_plots, trial_rows, write_best_config, write_csv
from .space_check import check_space
from .study import SweepSpec, grid_size, open_study
from .sweeper import Sweeper, gpu_ids
from .trial import check_hooks_option


def default_metric(config: str, metric: Optional[str], direction: Optional[str],
                   cfg_options: Optional[Dict[str, Any]] = None) -> Tuple[str, str]:
    """``(metric, 'maximize' | 'minimize')``: given, else from the config's ``evaluation``.

    The metric defaults to ``evaluation.save_best`` (unless ``'auto'``), else a single
    ``evaluation.metric``; the direction to the rule that picks the best checkpoint
    (:func:`mtrain.defaults.metric_rule`: ``evaluation.rule`` for the ``save_best``
    metric, else mmcv 1.x's inference from the name and ``greater_keys``/``less_keys``).

    Raises:
        ConfigError: no evaluation, no metric to name, or a metric whose direction
            neither the config nor its name gives.
    """
    evaluation = load_config(config, cfg_options).get('evaluation')
    if not isinstance(evaluation, dict):
        raise ConfigError('the config has no evaluation, so a trial has nothing to report; '
                          "add evaluation = dict(interval=1, metric='accuracy')",
                          key='evaluation', filename=config)
    save_best, named = evaluation.get('save_best'), evaluation.get('metric')
    if metric is None:
        metric = save_best if isinstance(save_best, str) and save_best != 'auto' else (
            named if isinstance(named, str) else None)
        if metric is None:
            raise ConfigError('cannot tell which metric to optimize; pass --metric KEY '
                              '(a key of the evaluation results, e.g. accuracy)',
                              key='evaluation', filename=config)
    if direction is None:
        rule = metric_rule(metric, evaluation.get('rule') if metric == save_best else None,
                           evaluation.get('greater_keys'), evaluation.get('less_keys'))
        if rule not in ('greater', 'less'):
            said = '' if rule is None else f' (evaluation.rule={rule!r} is neither)'
            raise ConfigError(f"cannot tell whether a greater or a smaller '{metric}' is "
                              f"better{said}; pass --direction max or min (or set "
                              "evaluation.rule='greater' or 'less' with save_best)",
                              key='evaluation.rule', filename=config)
        direction = {'greater': 'max', 'less': 'min'}[rule]
    return metric, {'max': 'maximize', 'min': 'minimize'}.get(direction, direction)


def check_sweep(spec: SweepSpec) -> None:
    """Everything that can be checked before the first trial (raises :class:`ConfigError`)."""
    check_space(spec.space, spec.config, spec.space_file, spec.fixed)
    check_hooks_option(spec)
    build_pruner(spec.pruner, spec.pruner_args)  # its arguments, before a trial needs it
    if spec.trials < 0 or spec.jobs < 1 or spec.gpus_per_trial < 1:
        raise ConfigError('--trials must be >= 0, --jobs and --gpus-per-trial >= 1')
    if spec.gpus_per_trial > 1 and spec.launcher == 'none':
        raise ConfigError(f'--gpus-per-trial {spec.gpus_per_trial} needs --launcher pytorch '
                          '(each trial a torchrun run of that many processes) or slurm (an '
                          'srun job step of that many tasks)', key='gpus_per_trial')
    if spec.launcher == 'slurm' and shutil.which('srun') is None:
        raise ConfigError('--launcher slurm runs each trial with srun, which is not on PATH; '
                          'run the sweep on a Slurm login node or inside an allocation '
                          '(salloc), or use --launcher pytorch on one machine',
                          key='launcher')
    if spec.sampler == 'grid' and spec.trials > grid_size(spec.space, spec.space_file):
        raise ConfigError(f'--sampler grid has {grid_size(spec.space, spec.space_file)} '
                          f'points, fewer than --trials {spec.trials}; lower --trials',
                          key='trials')
    gpus = gpu_ids() if spec.launcher == 'pytorch' else []  # Slurm allocates its own
    needed = spec.jobs * spec.gpus_per_trial
    if gpus and len(gpus) < needed:
        raise ConfigError(f'--jobs {spec.jobs} x --gpus-per-trial {spec.gpus_per_trial} needs '
                          f'{needed} GPUs; this machine shows {len(gpus)}', key='jobs')


def run_sweep(spec: SweepSpec, log: Callable[[str], None] = print,
              forks: Optional[ForkServer] = None) -> int:
    """Check, run the trials, report; the exit status (0, 2 for an error, 128+signal).

    ``forks``: the fork server that starts the trials (None: each a fresh process).
    """
    check_sweep(spec)
    os.makedirs(spec.work_dir, exist_ok=True)
    with sweep_lock(spec.work_dir):  # workers starting together
        study = open_study(spec)  # would race to create the database's tables
    log(f"sweep '{spec.study}': {spec.trials} trials of {spec.config}, "
        f'{spec.direction} {spec.metric}; storage {spec.storage}')
    sweeper = Sweeper(spec, study, log, forks)
    sweeper.run()
    report(study, spec, log)
    if sweeper.abort:
        raise ConfigError(sweeper.abort)
    if sweeper.stopped_by:
        return 128 + signal.Signals[sweeper.stopped_by].value
    return 0


def report(study: Any, spec: SweepSpec, log: Callable[[str], None] = print) -> None:
    """Print the table; write ``trials.csv``, ``best_config.py`` and the plots (unless
    ``spec.plots`` is False)."""
    rows = trial_rows(study, spec)
    log(format_table(rows))
    csv_path = osp.join(spec.work_dir, 'trials.csv')
    write_csv(rows, csv_path)
    log(f'table: {csv_path}')
    best_path = osp.join(spec.work_dir, 'best_config.py')
    if write_best_config(study, spec, best_path):
        best = study.best_trial
        log(f'best: trial {best.number}, {spec.metric} {best.value:.4f}; its config: '
            f'{best_path}')
    if spec.plots:
        log('plots:')
        for line in save_plots(study, osp.join(spec.work_dir, 'plots')):
            log(line)
    log(f'dashboard: optuna-dashboard {spec.storage}')
