"""ClearML: scalars and config through the ``clearml`` client's Task."""

from typing import Any, Dict, Optional

from ...registry import HOOKS
from .tracker import TrackerLoggerHook, numbers_only


@HOOKS.register_module()
class ClearMLLoggerHook(TrackerLoggerHook):
    """Log to a ClearML task, under mmcv 1.x's name and keys.

    Config (the same as mmcv 1.x)::

        log_config = dict(interval=10, hooks=[
            dict(type='TextLoggerHook'),
            dict(type='ClearMLLoggerHook',
                 init_kwargs=dict(project_name='digits', task_name='lenet'))])

    ``init_kwargs`` go to ``clearml.Task.init``, which by default also hooks
    into frameworks (``torch.save`` calls become output models) and the
    console: pass ``auto_connect_frameworks=False`` etc. to keep it out.
    Offline: ``CLEARML_OFFLINE_MODE=1`` (the session is kept under
    ``~/.clearml/cache/offline/`` for ``clearml-task --import-offline-session``).

    Each tag is reported with ``logger.report_scalar(tag, tag, value,
    iteration=<iterations done>)``; the merged config is the task's
    ``config`` configuration. When training resumes from a checkpoint this
    hook wrote, ``continue_last_task=<task id>`` continues the same task and
    its scalars go on at the checkpoint's iteration. An offline task cannot be
    continued: a resumed offline run is a new task whose iterations go on.
    The task is closed after training.

    Args:
        init_kwargs: arguments of ``clearml.Task.init``.
        interval, ignore_last, reset_flag, by_epoch: see :class:`LoggerHook`.
    """

    client = 'clearml'
    pip_name = 'clearml'

    def __init__(self, init_kwargs: Optional[Dict[str, Any]] = None, interval: int = 10,
                 ignore_last: bool = True, reset_flag: bool = False,
                 by_epoch: bool = True) -> None:
        super().__init__(interval, ignore_last, reset_flag, by_epoch)
        self.init_kwargs = dict(init_kwargs or {})
        self.task = None

    def start(self, runner, clearml, resumed: bool) -> str:
        kwargs = dict(self.init_kwargs)
        if resumed and self.run_id and not clearml.Task.is_offline():
            kwargs.setdefault('continue_last_task', self.run_id)
        self.task = clearml.Task.init(**kwargs)
        self.task_logger = self.task.get_logger()
        return self.task.id

    def log_config(self, config: Dict[str, Any], config_text: str, resumed: bool) -> None:
        if config and not resumed:
            self.task.connect_configuration(config, name='config')

    def write(self, tags: Dict[str, Any], step: int) -> None:
        for tag, value in numbers_only(tags).items():
            self.task_logger.report_scalar(tag, tag, value, step)

    def finish(self, runner) -> None:
        self.task.close()
        self.task = None
