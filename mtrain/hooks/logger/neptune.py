"""Neptune: scalars and config through the ``neptune`` client (1.x API)."""

from typing import Any, Dict, Optional

from ...registry import HOOKS
from .tracker import TrackerLoggerHook


@HOOKS.register_module()
class NeptuneLoggerHook(TrackerLoggerHook):
    """Log to a Neptune run, under mmcv 1.x's name and keys.

    Config (the same as mmcv 1.x)::

        log_config = dict(interval=10, hooks=[
            dict(type='TextLoggerHook'),
            dict(type='NeptuneLoggerHook', init_kwargs=dict(project='me/digits'))])

    ``init_kwargs`` go to ``neptune.init_run`` (mmcv 1.x called the older
    ``neptune.new.init``, which took the same keys); the token comes from
    ``NEPTUNE_API_TOKEN``. ``mode='offline'`` keeps the run in
    ``./.neptune`` of the working directory for ``neptune sync``.

    Each tag is a series, ``run[tag].append(value, step=<iterations done>)``;
    the merged config is the ``config`` namespace of a new run. When training
    resumes from a checkpoint this hook wrote, ``with_id`` reopens the same
    run and its series go on at the checkpoint's iteration. An offline run
    has no id yet, so a resumed offline run is a new one whose steps go on.

    Args:
        init_kwargs: arguments of ``neptune.init_run``.
        with_step: pass the iteration as each series' step; False lets
            Neptune count and logs a ``global_step`` series as well.
        interval, ignore_last, reset_flag, by_epoch: see :class:`LoggerHook`.
    """

    client = 'neptune'
    pip_name = 'neptune'

    def __init__(self, init_kwargs: Optional[Dict[str, Any]] = None, interval: int = 10,
                 ignore_last: bool = True, reset_flag: bool = True, with_step: bool = True,
                 by_epoch: bool = True) -> None:
        super().__init__(interval, ignore_last, reset_flag, by_epoch)
        self.init_kwargs = dict(init_kwargs or {})
        self.with_step = with_step
        self.run = None
        self._last_step: Dict[str, int] = {}

    def start(self, runner, neptune, resumed: bool) -> Optional[str]:
        self.neptune = neptune
        kwargs = dict(self.init_kwargs)
        if resumed and self.run_id:
            kwargs.setdefault('with_id', self.run_id)
        self.run = neptune.init_run(**kwargs)
        self._last_step = {}
        try:
            return self.run['sys/id'].fetch()
        except Exception:  # offline: the server assigns the id at `neptune sync`
            return None

    def log_config(self, config: Dict[str, Any], config_text: str, resumed: bool) -> None:
        if config and not resumed:
            from neptune.utils import stringify_unsupported  # with the client, at first use
            self.run['config'] = stringify_unsupported(config)

    def write(self, tags: Dict[str, Any], step: int) -> None:
        for tag, value in tags.items():
            # A series takes strictly increasing steps: a val line at the step of
            # the last train line repeats learning_rate and momentum, skip those.
            if self._last_step.get(tag, -1) >= step:
                continue
            self._last_step[tag] = step
            if self.with_step:
                self.run[tag].append(value, step=step)
            else:
                self.run[tag].append(value)
        if not self.with_step:
            self.run['global_step'].append(step)

    def finish(self, runner) -> None:
        self.run.stop()
        self.run = None
