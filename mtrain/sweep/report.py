"""What a sweep leaves to look at: the table of trials, the best config, Optuna's plots.

In the sweep's work dir:

* ``trials.csv``: one row per trial: number, state, the metric, each override, seconds,
  its folder and the command that reproduces it (also printed as a table);
* ``best_config.py``: the config with the best trial's overrides and seed, merged into
  one runnable file (``python tools/train.py <work dir>/best_config.py``);
* ``plots/*.png``: Optuna's optimization history, parameter importances, parallel
  coordinates and intermediate values (when matplotlib is installed).
"""

import csv
import os
import os.path as osp
import threading
import warnings
from typing import Any, Dict, List

from ..config import load_config
from ..hooks.optuna_pruning import import_optuna
from .study import SweepSpec

#: Optuna's matplotlib plots written by :func:`save_plots`, by file name.
PLOTS = {'history': 'plot_optimization_history', 'importances': 'plot_param_importances',
         'parallel_coordinate': 'plot_parallel_coordinate',
         'intermediate_values': 'plot_intermediate_values'}


def trial_rows(study: Any, spec: SweepSpec) -> List[Dict[str, Any]]:
    """One dict per trial (WAITING ones left out), in trial order."""
    rows = []
    for t in study.get_trials(deepcopy=False):
        if t.state.name == 'WAITING':
            continue
        took = t.duration.total_seconds() if t.duration is not None else None
        row = {'trial': t.number, 'state': t.state.name, spec.metric: t.value}
        row.update({key: t.params.get(key) for key in spec.space})
        row.update({'seconds': None if took is None else round(took, 1),
                    'work_dir': t.user_attrs.get('work_dir', ''),
                    'command': t.user_attrs.get('command', '')})
        rows.append(row)
    return rows


def format_table(rows: List[Dict[str, Any]]) -> str:
    """The rows as an aligned text table (without the command column)."""
    if not rows:
        return '(no trials)'
    columns = [c for c in rows[0] if c not in ('command', 'work_dir')]
    cells = [[_cell(row[c]) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = ['  '.join(c.ljust(w) for c, w in zip(columns, widths))]
    lines += ['  '.join(v.ljust(w) for v, w in zip(r, widths)) for r in cells]
    return '\n'.join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return '-'
    return f'{value:.6g}' if isinstance(value, float) else str(value)


def replacing(path: str) -> str:
    """A temporary name next to ``path`` with its extension; :func:`os.replace` it onto ``path``.

    Workers sharing a sweep folder each write the results when they finish: a reader
    (or the last writer) sees one whole file, never two interleaved.
    """
    root, ext = osp.splitext(path)
    return f'{root}.{os.getpid()}-{threading.get_ident()}.tmp{ext}'


def write_csv(rows: List[Dict[str, Any]], path: str) -> None:
    tmp = replacing(path)
    with open(tmp, 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ['trial'])
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


def best_trial(study: Any) -> Any:
    """The best COMPLETE trial, or None."""
    complete = [t for t in study.get_trials(deepcopy=False) if t.state.name == 'COMPLETE']
    return study.best_trial if complete else None


def write_best_config(study: Any, spec: SweepSpec, path: str) -> bool:
    """The config with the best trial's overrides and seed, as one runnable file."""
    best = best_trial(study)
    if best is None:
        return False
    cfg = load_config(spec.config, {**spec.fixed, **best.params})
    cfg.seed = spec.seed
    tmp = replacing(path)
    cfg.dump(tmp)
    os.replace(tmp, path)
    return True


def save_plots(study: Any, out_dir: str) -> List[str]:
    """Optuna's plots as PNGs; a line for each one written or skipped (and why)."""
    try:
        import matplotlib  # noqa: PLC0415  (optional: the 'tools' extra)
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt  # noqa: PLC0415
        from optuna.visualization import matplotlib as plots  # noqa: PLC0415
    except ImportError:
        return ['plots skipped: matplotlib is not installed (pip install matplotlib)']
    os.makedirs(out_dir, exist_ok=True)
    optuna = import_optuna()
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # "no complete trials": said below
    try:
        return [_save_plot(plots, name, osp.join(out_dir, f'{name}.png'), study, plt)
                for name in PLOTS]
    finally:
        optuna.logging.set_verbosity(verbosity)


def _save_plot(plots: Any, name: str, path: str, study: Any, plt: Any) -> str:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')  # Optuna's ExperimentalWarning
            axes = getattr(plots, PLOTS[name])(study)
        figure = (axes.flat[0] if hasattr(axes, 'flat') else axes).get_figure()
        tmp = replacing(path)
        figure.savefig(tmp, bbox_inches='tight')
        plt.close(figure)
        os.replace(tmp, path)
        return f'  {path}'
    except Exception as e:  # noqa: BLE001  (e.g. importances need two finished trials)
        plt.close('all')
        return f'  {name} skipped: {e}'
