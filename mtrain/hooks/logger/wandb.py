"""Weights & Biases: scalars, config and work-dir files through the ``wandb`` client."""

import os
import os.path as osp
from typing import Any, Dict, Optional, Sequence, Union

from ...registry import HOOKS
from .tracker import TrackerLoggerHook, checkpoint_files

_SUMMARIES = ('min', 'max', 'mean', 'best', 'last', 'none')


@HOOKS.register_module()
class WandbLoggerHook(TrackerLoggerHook):
    """Log to a W&B run, under mmcv 1.x's name and keys.

    Config (the same as mmcv 1.x)::

        log_config = dict(interval=10, hooks=[
            dict(type='TextLoggerHook'),
            dict(type='WandbLoggerHook', init_kwargs=dict(project='digits'),
                 define_metric_cfg={'val/accuracy': 'max'})])

    Offline (no account, no network; ``wandb sync`` uploads later): set
    ``WANDB_MODE=offline`` or ``init_kwargs=dict(mode='offline')``.

    Each log line is one ``run.log(tags, step=<iterations done>)``. The merged
    config goes into ``run.config``; at the end, the work dir's files ending
    in ``out_suffix`` (the config copy and the logs; add ``'.pth'`` for the
    final and best checkpoints) are logged as one artifact. When training
    resumes from a checkpoint this hook wrote, ``wandb.init`` gets the saved
    run ``id`` with ``resume='allow'``: the same run goes on at the
    checkpoint's iteration.

    Args:
        init_kwargs: arguments of ``wandb.init`` (project, name, mode, dir...).
            ``dir`` defaults to ``WANDB_DIR`` when it is set, else the work dir.
        commit: ``commit`` of ``run.log``. With ``with_step``, True lets W&B
            commit each iteration's row when a later one is logged (or at the
            end), so an evaluation at that iteration joins it.
        with_step: pass the iteration as W&B's ``step``; False logs it as a
            ``global_step`` value instead (W&B counts its own steps).
        log_artifact: log the work dir's ``out_suffix`` files after training.
        out_suffix: file name endings to put in the artifact.
        define_metric_cfg: ``{metric: summary}`` for ``run.define_metric``,
            summary one of min, max, mean, best, last, none.
        interval, ignore_last, reset_flag, by_epoch: see :class:`LoggerHook`.
    """

    client = 'wandb'
    pip_name = 'wandb'

    def __init__(self, init_kwargs: Optional[Dict[str, Any]] = None, interval: int = 10,
                 ignore_last: bool = True, reset_flag: bool = False, commit: bool = True,
                 by_epoch: bool = True, with_step: bool = True, log_artifact: bool = True,
                 out_suffix: Union[str, Sequence[str]] = ('.log.json', '.log', '.py'),
                 define_metric_cfg: Optional[Dict[str, str]] = None) -> None:
        super().__init__(interval, ignore_last, reset_flag, by_epoch)
        for metric, summary in (define_metric_cfg or {}).items():
            if summary not in _SUMMARIES:
                raise ValueError(f"define_metric_cfg['{metric}'] is '{summary}'; a W&B summary "
                                 f"is one of {', '.join(_SUMMARIES)}")
        self.init_kwargs = dict(init_kwargs or {})
        self.commit = commit
        self.with_step = with_step
        self.log_artifact = log_artifact
        self.out_suffix = (out_suffix, ) if isinstance(out_suffix, str) else tuple(out_suffix)
        self.define_metric_cfg = dict(define_metric_cfg or {})
        self.run = None

    def start(self, runner, wandb, resumed: bool) -> str:
        kwargs = dict(self.init_kwargs)
        # The user's WANDB_DIR wins over the work dir (passed on: W&B reads its
        # environment once per process).
        folder = os.environ.get('WANDB_DIR') or runner.work_dir
        if folder is not None:
            kwargs.setdefault('dir', folder)
        if resumed and self.run_id:
            kwargs.setdefault('id', self.run_id)
            kwargs.setdefault('resume', 'allow')
        self.wandb = wandb
        self.run = wandb.init(**kwargs)
        for metric, summary in self.define_metric_cfg.items():
            self.run.define_metric(metric, summary=summary)
        return self.run.id

    def log_config(self, config: Dict[str, Any], config_text: str, resumed: bool) -> None:
        if config:
            self.run.config.update(config, allow_val_change=True)

    def write(self, tags: Dict[str, Any], step: int) -> None:
        if self.with_step:
            # No commit=True with a step: W&B then keeps the row open until a later
            # step arrives, so the val line of an epoch's last iteration joins its
            # row instead of being dropped as an old step.
            self.run.log(tags, step=step, commit=None if self.commit else False)
        else:
            self.run.log(dict(tags, global_step=step), commit=self.commit)

    def finish(self, runner) -> None:
        if self.log_artifact and runner.work_dir is not None:
            artifact = self.wandb.Artifact(name='artifacts', type='model')
            for path in self._artifact_files(runner):
                artifact.add_file(path)
            self.run.log_artifact(artifact)
        self.run.finish()
        self.run = None

    def _artifact_files(self, runner):
        """The work dir's files ending in ``out_suffix`` (top level: W&B's own folder is below)."""
        names = sorted(os.listdir(runner.work_dir))
        files = [osp.join(runner.work_dir, n) for n in names if n.endswith(self.out_suffix)
                 and osp.isfile(osp.join(runner.work_dir, n))
                 and not osp.islink(osp.join(runner.work_dir, n))]  # latest.pth: a link
        if '.pth' in self.out_suffix:  # the final and best checkpoints of a custom out_dir too
            files += [p for p in checkpoint_files(runner) if p not in files]
        return files
