"""DVCLive: metrics and params as local files (``dvclive/``) through the ``dvclive`` client."""

import csv
import glob
import os.path as osp
from pathlib import Path
from typing import Any, Dict, Optional, Union

from ...registry import HOOKS
from .tracker import TrackerLoggerHook, numbers_only


@HOOKS.register_module()
class DvcliveLoggerHook(TrackerLoggerHook):
    """Log with DVCLive, under mmcv 1.x's name and keys.

    Config (mmcv 1.x's keys; the other keywords go to ``dvclive.Live``)::

        log_config = dict(interval=10, hooks=[
            dict(type='TextLoggerHook'),
            dict(type='DvcliveLoggerHook', model_file='work_dirs/digits/model.pth')])

    Each tag is a metric, ``plots/metrics/<tag>.tsv`` with a ``step`` column
    holding the iterations done (mmcv 1.x used the epoch as the step under
    ``EpochBasedRunner``: several lines of an epoch shared one step). The
    merged config is ``params.yaml``. A resumed run (training continued from
    a checkpoint) opens the same directory with ``Live(resume=True)``, so
    each file goes on at the checkpoint's iteration instead of starting over;
    rows past that iteration (logged after the checkpoint by a run that then
    crashed) are dropped first, so no step is held twice.

    Args:
        model_file: save a checkpoint here after every training epoch (as
            mmcv 1.x did), e.g. for ``dvc add``.
        dir: DVCLive's directory. Default: ``<work_dir>/dvclive`` (DVCLive's
            own default is ``dvclive`` in the working directory).
        resume: ``Live(resume=...)``; None resumes exactly when training does.
        report, save_dvc_exp, dvcyaml, cache_images, exp_name, exp_message,
            monitor_system: passed to ``dvclive.Live`` (its defaults).
        interval, ignore_last, reset_flag, by_epoch: see :class:`LoggerHook`.
    """

    client = 'dvclive'
    pip_name = 'dvclive'

    def __init__(self, model_file: Optional[str] = None, interval: int = 10,
                 ignore_last: bool = True, reset_flag: bool = False, by_epoch: bool = True, *,
                 dir: Optional[str] = None, resume: Optional[bool] = None,
                 report: Optional[str] = None, save_dvc_exp: bool = True,
                 dvcyaml: Union[str, bool, None] = 'dvc.yaml', cache_images: bool = False,
                 exp_name: Optional[str] = None, exp_message: Optional[str] = None,
                 monitor_system: bool = False) -> None:
        super().__init__(interval, ignore_last, reset_flag, by_epoch)
        self.model_file = model_file
        self.dir = dir
        self.resume = resume
        self.live_kwargs = dict(report=report, save_dvc_exp=save_dvc_exp, dvcyaml=dvcyaml,
                                cache_images=cache_images, exp_name=exp_name,
                                exp_message=exp_message, monitor_system=monitor_system)
        self.live = None

    def start(self, runner, dvclive, resumed: bool) -> str:
        live_dir = self.dir or osp.join(runner.work_dir or '.', 'dvclive')
        resume = resumed if self.resume is None else self.resume
        if resume:  # a run resumed after a crash logged beyond its checkpoint: forget that
            drop_steps_after(osp.join(live_dir, 'plots', 'metrics'), runner.iter)
        self.live = dvclive.Live(dir=live_dir, resume=resume, **self.live_kwargs)
        return live_dir

    def log_config(self, config: Dict[str, Any], config_text: str, resumed: bool) -> None:
        if config:
            self.live.log_params(config)

    def write(self, tags: Dict[str, Any], step: int) -> None:
        self.live.step = step
        for tag, value in numbers_only(tags).items():
            self.live.log_metric(tag, value)

    def after_train_epoch(self, runner) -> None:
        if self.model_file is not None:  # every rank: a sharded model gathers its weights
            runner.gather_checkpoint_state()
            runner.save_checkpoint(str(Path(self.model_file).parent),
                                   filename_tmpl=Path(self.model_file).name,
                                   create_symlink=False)
        super().after_train_epoch(runner)

    def finish(self, runner) -> None:
        self.live.end()
        self.live = None


def drop_steps_after(metrics_dir: str, step: int) -> None:
    """Remove the rows of every ``*.tsv`` under ``metrics_dir`` whose ``step`` is past ``step``."""
    for path in glob.glob(osp.join(metrics_dir, '**', '*.tsv'), recursive=True):
        with open(path, newline='') as f:
            rows = list(csv.reader(f, delimiter='\t'))
        if not rows or 'step' not in rows[0]:
            continue
        column = rows[0].index('step')
        kept = [rows[0]] + [r for r in rows[1:] if len(r) > column and int(r[column]) <= step]
        if len(kept) < len(rows):
            with open(path, 'w', newline='') as f:
                csv.writer(f, delimiter='\t').writerows(kept)
