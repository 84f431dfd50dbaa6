"""Hyperparameter sweeps over config overrides, on Optuna (docs/sweeps.md).

``tools/sweep.py CONFIG --space SPACE.py`` runs each trial as an ordinary
``tools/train.py`` run with the trial's ``--cfg-options``, in its own folder;
the study lives in a database (SQLite in the sweep's folder by default).

Modules, in the order a sweep uses them: :mod:`.space` (reading a SPACE file),
:mod:`.space_check` (checking it against the config), :mod:`.study` (the Optuna
study), :mod:`.claims` (which worker runs which trial), :mod:`.trial` (one
training run), :mod:`.sweeper` (the workers), :mod:`.report` (table, best
config, plots) and :mod:`.run` (all of it).
"""

from .run import check_sweep, default_metric, report, run_sweep
from .space import Distribution, choice, intrange, load_space, loguniform, uniform
from .study import SweepSpec

__all__ = ['Distribution', 'SweepSpec', 'check_sweep', 'choice', 'default_metric', 'intrange',
           'load_space', 'loguniform', 'report', 'run_sweep', 'uniform']
