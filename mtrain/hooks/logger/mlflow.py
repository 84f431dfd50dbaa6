"""MLflow: metrics, config and checkpoints through the ``mlflow`` client (``mlflow-skinny``)."""

import os.path as osp
from typing import Any, Dict, Optional

from ...registry import HOOKS
from ...utils.errors import ConfigError
from .tracker import TrackerLoggerHook, checkpoint_files, numbers_only

# Older tracking servers reject longer parameter values.
_MAX_PARAM_LEN = 500


@HOOKS.register_module()
class MlflowLoggerHook(TrackerLoggerHook):
    """Log to an MLflow run, under mmcv 1.x's name and keys.

    Config (the same as mmcv 1.x)::

        log_config = dict(interval=10, hooks=[
            dict(type='TextLoggerHook'),
            dict(type='MlflowLoggerHook', exp_name='digits', tags=dict(team='vision'))])

    Where runs go is MLflow's own setting: ``MLFLOW_TRACKING_URI`` (a server,
    ``sqlite:///mlflow.db``, or ``./mlruns`` with ``MLFLOW_ALLOW_FILE_STORE=true``
    on MLflow 3).

    Each log line is one ``mlflow.log_metrics(tags, step=<iterations done>)``
    (text values are left out: MLflow metrics are numbers). A new run gets
    the merged config as parameters (``model.type``, ``optimizer.lr``...,
    values cut at 500 characters) and as the artifact ``config.py``. When
    training resumes from a checkpoint this hook wrote, the same run is
    reopened (``mlflow.start_run(run_id=...)``) and its metrics go on at the
    checkpoint's iteration; the resumed config is added as
    ``config_resumed_iter_<N>.py`` (parameters cannot change in MLflow). A
    run that crashed logged past its last checkpoint: MLflow cannot delete
    those points, so the resumed run logs only the steps after the last one
    the run holds (on the CPU a resumed run recomputes the same values).

    With MLflow's own defaults (no ``MLFLOW_TRACKING_URI``) runs go to
    ``./mlflow.db`` (MLflow 3's SQLite store, which needs ``sqlalchemy`` and
    ``alembic``: both come with ``pip install -e '.[trackers]'``).

    Args:
        exp_name: experiment to log to (created if missing); None: MLflow's
            active or default experiment.
        tags: run tags.
        params: extra run parameters (on a new run).
        log_model: after training, log the final checkpoint and the best
            ones (``save_best``) as artifacts under ``models/``. mmcv 1.x
            logged ``runner.model`` with ``mlflow.pytorch.log_model``
            instead (see docs/logging.md).
        interval, ignore_last, reset_flag, by_epoch: see :class:`LoggerHook`.
    """

    client = 'mlflow'
    pip_name = 'mlflow-skinny'

    def __init__(self, exp_name: Optional[str] = None, tags: Optional[Dict[str, Any]] = None,
                 params: Optional[Dict[str, Any]] = None, log_model: bool = True,
                 interval: int = 10, ignore_last: bool = True, reset_flag: bool = False,
                 by_epoch: bool = True) -> None:
        super().__init__(interval, ignore_last, reset_flag, by_epoch)
        self.exp_name = exp_name
        self.tags = tags
        self.params = params
        self.log_model = log_model
        self._owns_run = False
        self._held_through: Optional[int] = None

    def start(self, runner, mlflow, resumed: bool) -> str:
        self.mlflow = mlflow
        if self.exp_name is not None:
            try:
                mlflow.set_experiment(self.exp_name)
            except Exception as e:
                raise _store_error(mlflow, e) or e
        active = mlflow.active_run()
        if active is not None and not (resumed and self.run_id):
            run = active  # the caller's run: log into it, leave it open
        else:
            try:
                run = mlflow.start_run(run_id=self.run_id if resumed else None)
            except Exception as e:
                raise _store_error(mlflow, e) or e
            self._owns_run = True
        self._resumed_at = runner.iter if resumed and self.run_id else None
        self._held_through = self._last_step(run.info.run_id) if self._resumed_at else None
        if self.tags is not None:
            mlflow.set_tags(self.tags)
        return run.info.run_id

    def _last_step(self, run_id: str) -> Optional[int]:
        """The last step the reopened run holds (a crashed run logged past its checkpoint)."""
        client = self.mlflow.tracking.MlflowClient()
        steps = [m.step for key in client.get_run(run_id).data.metrics
                 for m in client.get_metric_history(run_id, key)]
        return max(steps, default=None)

    def log_config(self, config: Dict[str, Any], config_text: str, resumed: bool) -> None:
        if self._resumed_at is not None:  # parameters of a run cannot change
            if config_text:
                self.mlflow.log_text(config_text, f'config_resumed_iter_{self._resumed_at}.py')
            return
        params = {k: str(v)[:_MAX_PARAM_LEN] for k, v in _flatten(config).items()}
        params.update(self.params or {})
        if params:
            self.mlflow.log_params(params)
        if config_text:
            self.mlflow.log_text(config_text, 'config.py')

    def write(self, tags: Dict[str, Any], step: int) -> None:
        if self._held_through is not None and step <= self._held_through:
            return  # MLflow cannot delete points: keep the ones logged before the crash
        self.mlflow.log_metrics(numbers_only(tags), step=step)

    def finish(self, runner) -> None:
        try:
            if self.log_model:
                for path in checkpoint_files(runner):
                    self.mlflow.log_artifact(osp.realpath(path), artifact_path='models')
        finally:  # a failed upload still closes the run this hook opened
            if self._owns_run:
                self._owns_run = False
                self.mlflow.end_run()


def _flatten(config: Dict[str, Any], prefix: str = '') -> Dict[str, Any]:
    """``{'optimizer': {'lr': 0.1}}`` → ``{'optimizer.lr': 0.1}`` (lists stay values)."""
    flat: Dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, f'{prefix}{key}.'))
        else:
            flat[f'{prefix}{key}'] = value
    return flat


def _store_error(mlflow, error: Exception) -> Optional[ConfigError]:
    """A one-line fix when MLflow's default store cannot be opened (sqlalchemy missing)."""
    missing = isinstance(error, ImportError) and getattr(error, 'name', '') in (
        'sqlalchemy', 'alembic')
    if not missing and type(error).__name__ != 'UnsupportedModelRegistryStoreURIException':
        return None
    return ConfigError(
        f'MlflowLoggerHook: MLflow stores runs in {mlflow.get_tracking_uri()}, which needs the '
        "sqlalchemy and alembic packages: pip install sqlalchemy alembic (both in mtrain's "
        "'trackers' extra), or set MLFLOW_TRACKING_URI to a tracking server",
        key='log_config.hooks')
