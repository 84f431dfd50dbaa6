"""The Optuna study of a sweep: its storage, sampler, direction, and what it was run with.

The study remembers the config, the search space and the metric it was started with
(study user attributes); running the same sweep again continues it, and running a
different config or space on it is refused rather than mixed into one history.
"""

import os.path as osp
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import numpy

from ..config import parse_cfg_options
from ..hooks.optuna_pruning import import_optuna, open_storage
from ..utils import ConfigError
from .space import Distribution

#: ``--sampler`` names and Optuna's classes.
SAMPLERS = {'tpe': 'TPESampler', 'random': 'RandomSampler', 'grid': 'GridSampler',
            'cmaes': 'CmaEsSampler'}


@dataclass
class SweepSpec:
    """Everything that defines a sweep (the command line of ``tools/sweep.py``).

    Attributes:
        config: the training config file.
        space_file: the SPACE file; ``space`` its distributions.
        work_dir: the sweep's folder: ``trial_NNNN/`` per trial, the SQLite file, results.
        trials: how many trials the study is to have in all (every state counted).
        storage: the database URL (default: SQLite in ``work_dir``).
        study: the study name.
        metric, direction: what is optimized (``'maximize'`` or ``'minimize'``).
        sampler, pruner, pruner_args: Optuna's; see :data:`SAMPLERS` and
            :data:`mtrain.hooks.optuna_pruning.PRUNERS`.
        seed: every trial's training seed and the sampler's seed.
        jobs: trials at a time on this machine.
        launcher, gpus_per_trial: ``'pytorch'`` runs each trial under torchrun on
            ``gpus_per_trial`` processes; ``'slurm'`` as an ``srun`` job step of that many
            tasks (one per GPU), as ``tools/slurm_train.sh`` does.
        partition, gpus_per_node, cpus_per_task, srun_args: ``srun``'s ``-p``,
            ``--ntasks-per-node`` (and ``--gres=gpu:``; default ``min(gpus_per_trial, 8)``),
            ``--cpus-per-task`` and further arguments (one string, split as a shell
            would), for ``launcher='slurm'``.
        train_script: ``tools/train.py``, which runs each trial.
        cfg_options: ``--cfg-options`` every trial gets (``KEY=VALUE`` strings, e.g. a
            shorter schedule), before its own overrides.
        plots: whether the results include Optuna's plots (seconds to draw; ``--no-plots``).
    """
    config: str
    space_file: str
    space: Dict[str, Distribution]
    work_dir: str
    trials: int
    study: str
    metric: str
    direction: str
    storage: Optional[str] = None
    sampler: str = 'tpe'
    pruner: str = 'median'
    pruner_args: Dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    jobs: int = 1
    launcher: str = 'none'
    gpus_per_trial: int = 1
    partition: Optional[str] = None
    gpus_per_node: Optional[int] = None
    cpus_per_task: int = 5
    srun_args: str = ''
    train_script: str = 'tools/train.py'
    cfg_options: List[str] = field(default_factory=list)
    plots: bool = True

    @property
    def fixed(self) -> Dict[str, Any]:
        """``cfg_options`` parsed, as ``load_config`` takes them."""
        return parse_cfg_options(self.cfg_options)

    def __post_init__(self) -> None:
        self.work_dir = osp.abspath(self.work_dir)
        if self.storage is None:
            self.storage = 'sqlite:///' + osp.join(self.work_dir, 'sweep.db')


def build_sampler(spec: SweepSpec, trials: Optional[int] = None) -> Any:
    """The Optuna sampler named by ``spec.sampler``, seeded with ``spec.seed``.

    ``trials``: the number of trials the study has. TPE and random sampling then draw the
    next trial with a generator seeded with ``(spec.seed, trials)``: workers sharing a study
    (and a sweep run again after a stop) would otherwise each start the generator at the
    same seed and draw the same values for their first trials. The grid and CMA-ES samplers
    keep ``spec.seed`` (the grid's order is its seed; CMA-ES keeps its state in the study).
    """
    optuna = import_optuna()
    if spec.sampler not in SAMPLERS:
        raise ConfigError(f"unknown sampler '{spec.sampler}'; choose one of "
                          f"{', '.join(SAMPLERS)}", key='sampler')
    if spec.sampler == 'grid':
        return optuna.samplers.GridSampler(grid_values(spec.space, spec.space_file),
                                           seed=spec.seed)
    if spec.sampler == 'cmaes':
        try:
            __import__('cmaes')
        except ImportError as e:
            raise ConfigError('--sampler cmaes needs the cmaes package: pip install cmaes',
                              key='sampler') from e
        return optuna.samplers.CmaEsSampler(seed=spec.seed)
    seed = spec.seed if trials is None else int(
        numpy.random.SeedSequence([spec.seed, trials]).generate_state(1)[0])
    return getattr(optuna.samplers, SAMPLERS[spec.sampler])(seed=seed)


def grid_values(space: Dict[str, Distribution], space_file: str) -> Dict[str, list]:
    """Every value of each key, for ``--sampler grid`` (continuous ranges need a ``step``)."""
    grid = {}
    for key, dist in space.items():
        if dist.kind == 'choice':
            grid[key] = list(dist.choices)
        elif dist.step is not None and not dist.log:
            count = int(round((dist.high - dist.low) / dist.step)) + 1
            grid[key] = [round(dist.low + i * dist.step, 12) for i in range(count)]
        else:
            raise ConfigError(f'--sampler grid needs a finite set of values, but the space '
                              f'gives {dist.describe()}; give a list, an intrange, or '
                              'uniform(low, high, step=...)', key=key, filename=space_file)
    return grid


def grid_size(space: Dict[str, Distribution], space_file: str) -> int:
    size = 1
    for values in grid_values(space, space_file).values():
        size *= len(values)
    return size


def open_study(spec: SweepSpec) -> Any:
    """Create the study, or load it and check that it belongs to this sweep."""
    optuna = import_optuna()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=open_storage(spec.storage), study_name=spec.study,
                                sampler=build_sampler(spec), direction=spec.direction,
                                load_if_exists=True)
    expected = {'config': osp.abspath(spec.config), 'cfg_options': list(spec.cfg_options),
                'metric': spec.metric,
                'space': {k: d.describe() for k, d in spec.space.items()}}
    found = study.user_attrs
    if not found:
        for name, value in expected.items():
            study.set_user_attr(name, value)
        return study
    if study.direction.name.lower() != spec.direction:
        raise ConfigError(f"study '{spec.study}' {study.direction.name.lower()}s its metric; "
                          f'this sweep would {spec.direction} it. Use another --study name',
                          key='direction')
    for name, value in expected.items():
        if found.get(name) != value:
            raise ConfigError(f"study '{spec.study}' in {spec.storage} was run with {name} "
                              f'{found.get(name)!r}, not {value!r}; use another --study name '
                              'or --work-dir for a different sweep', key=name)
    return study
