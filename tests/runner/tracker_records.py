"""Test-only: what the kill-anywhere matrix's tracker row reads back from the trackers' own files.

The row logs to DVCLive (``<work_dir>/dvclive``) and to an MLflow file store
(``<work_dir>/mlruns``, experiment ``matrix``), both offline. Each record is
``{tag: [(step, value), ...]}`` in the order the tracker holds it; a step held
twice (a resumed run going back in time, issue 22) fails here by name.
"""

import csv
import glob
import os.path as osp
from pathlib import Path
from typing import Dict, List, Tuple

Record = Dict[str, List[Tuple[int, str]]]

#: The two trackers' hooks, as the row's ``log_config`` adds them.
HOOKS = ("dict(type='DvcliveLoggerHook', save_dvc_exp=False, dvcyaml=None), "
         "dict(type='MlflowLoggerHook', exp_name='matrix', log_model=False)")


def mlflow_env(work_dir) -> Dict[str, str]:
    """The environment a run logs to ``<work_dir>/mlruns`` under (with MLFLOW_ALLOW_FILE_STORE)."""
    return dict(MLFLOW_TRACKING_URI=(Path(work_dir) / 'mlruns').as_uri())


def dvclive_record(work_dir) -> Record:
    """Every ``plots/metrics/**.tsv``: the step column and the value column, as written."""
    metrics = osp.join(work_dir, 'dvclive', 'plots', 'metrics')
    record = {}
    for path in sorted(glob.glob(osp.join(metrics, '**', '*.tsv'), recursive=True)):
        tag = osp.splitext(osp.relpath(path, metrics))[0]
        with open(path, newline='') as f:
            rows = list(csv.DictReader(f, delimiter='\t'))
        record[tag] = [(int(r['step']), r[osp.basename(tag)]) for r in rows]
    return record


def mlflow_record(work_dir, finished: bool = True) -> Record:
    """The one run's metric histories, ordered by step; its status FINISHED if ``finished``."""
    from mlflow.tracking import MlflowClient  # (imported by the row only: ~4 s)
    client = MlflowClient(tracking_uri=mlflow_env(work_dir)['MLFLOW_TRACKING_URI'])
    [run] = client.search_runs([client.get_experiment_by_name('matrix').experiment_id])
    assert (run.info.status == 'FINISHED') == finished, run.info.status
    return {tag: sorted((m.step, repr(m.value))
                        for m in client.get_metric_history(run.info.run_id, tag))
            for tag in sorted(run.data.metrics)}


def tracker_records(work_dir, finished: bool = True) -> Dict[str, Record]:
    """Both trackers' records, each step checked to be held once."""
    records = {'dvclive': dvclive_record(work_dir), 'mlflow': mlflow_record(work_dir, finished)}
    for tracker, record in records.items():
        assert record, f'{tracker} holds nothing in {work_dir}'
        for tag, points in record.items():
            steps = [step for step, _ in points]
            assert steps == sorted(set(steps)), f'{tracker} {tag}: steps {steps}'
    return records
