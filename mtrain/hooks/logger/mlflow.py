"""MLflow: metrics, config and checkpoints through the ``mlflow`` client (``mlflow-skinny``)."""

import os.path as osp
from typing import Any, Dict, Optional

from ...registry import HOOKS
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
    ``config_resumed_iter_<N>.py`` (parameters cannot change in MLflow).

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

    def start(self, runner, mlflow, resumed: bool) -> str:
        self.mlflow = mlflow
        if self.exp_name is not None:
            mlflow.set_experiment(self.exp_name)
        active = mlflow.active_run()
        if active is not None and not (resumed and self.run_id):
            run = active  # the caller's run: log into it, leave it open
        else:
            run = mlflow.start_run(run_id=self.run_id if resumed else None)
            self._owns_run = True
        self._resumed_at = runner.iter if resumed and self.run_id else None
        if self.tags is not None:
            mlflow.set_tags(self.tags)
        return run.info.run_id

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
