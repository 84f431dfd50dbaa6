"""TensorBoard event files: every logged value as a scalar, at each log line."""

import os.path as osp
from typing import Optional

from ...registry import HOOKS
from .base import LoggerHook


@HOOKS.register_module()
class TensorboardLoggerHook(LoggerHook):
    """Write the log buffer's values as TensorBoard scalars (``tensorboard --logdir``).

    At every log line (train interval, val phase, evaluation) it writes, with
    the number of iterations done as the step, the tags mmcv 1.x uses:
    ``train/<loss or other logged value>`` (``grad_norm`` when clipping,
    ``fp16_skipped_steps``...), ``val/<metric>``, ``learning_rate`` and
    ``momentum`` (first param group; ``learning_rate/<name>`` per optimizer
    of a dict), and ``train/loss_scale`` under an fp16 optimizer hook with a
    ``GradScaler``. ``time`` and ``data_time`` are left out, as in mmcv.

    ``torch.utils.tensorboard`` is imported in ``before_run``, so a run
    without this hook never loads it; its ``SummaryWriter`` writes the event
    file from a background thread. Only rank 0 writes.

    Config::

        log_config = dict(interval=10, hooks=[dict(type='TextLoggerHook'),
                                              dict(type='TensorboardLoggerHook')])

    Args:
        log_dir: where the event files go. Default: ``<work_dir>/tf_logs``.
        interval, ignore_last, reset_flag, by_epoch: see :class:`LoggerHook`.
    """

    def __init__(self, log_dir: Optional[str] = None, interval: int = 10,
                 ignore_last: bool = True, reset_flag: bool = False,
                 by_epoch: bool = True) -> None:
        super().__init__(interval, ignore_last, reset_flag, by_epoch)
        self.log_dir = log_dir
        self.writer = None

    def before_run(self, runner) -> None:
        super().before_run(runner)
        if runner.rank != 0:
            return
        try:
            # Imported here: TensorBoard is optional and costs an import a run may not need.
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as e:
            raise ImportError('TensorboardLoggerHook needs the tensorboard package, which is '
                              "not installed: pip install tensorboard (or pip install -e "
                              "'.[tools]'), or remove the hook from log_config.hooks") from e
        if self.log_dir is None:
            if runner.work_dir is None:
                raise ValueError('TensorboardLoggerHook needs a log_dir when the runner has '
                                 'no work_dir; set log_config.hooks[...].log_dir')
            self.log_dir = osp.join(runner.work_dir, 'tf_logs')
        self.writer = SummaryWriter(self.log_dir)

    def log(self, runner) -> None:
        if self.writer is None:
            return
        for tag, value in self.loggable_tags(runner).items():
            if isinstance(value, str):
                self.writer.add_text(tag, value, self.global_step)
            else:
                self.writer.add_scalar(tag, value, self.global_step)

    def after_run(self, runner) -> None:
        if self.writer is not None:
            self.writer.close()  # flushes the background writer
            self.writer = None

