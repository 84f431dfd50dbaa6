"""What every experiment-tracker hook shares: start, log, finish, never stop training.

A tracker hook (W&B, MLflow, DVCLive, ClearML) implements three
calls on its client: :meth:`TrackerLoggerHook.start` a run (or continue the
one a resumed checkpoint names), :meth:`TrackerLoggerHook.write` one log
line's tags at a step, and :meth:`TrackerLoggerHook.finish`. This base does
the rest the same way for all of them:

- the client package is looked up (not imported) when the hook is built, so
  a missing package fails before training with the pip command, and
  imported only in ``before_run`` on rank 0, the only rank that logs;
- the step is :attr:`LoggerHook.global_step`, the number of iterations
  done, so a resumed run's steps continue where the checkpoint left off;
- the tracker's run id is kept in the hook's checkpoint state, so a resumed
  run appends to the same run where the tracker can;
- a client error after the run started (network gone, disk full) logs one
  warning and the hook goes quiet: training, the text log and the JSON log
  go on.
"""

import glob
import importlib
import importlib.util
import os.path as osp
import sys
from typing import Any, Callable, Dict, List, Optional

from mmengine.config import Config

from ...utils.errors import ConfigError
from .base import LoggerHook

#: The hooks a user can pick instead of one that cannot work (see retired.py).
TRACKER_HOOKS = ('TensorboardLoggerHook', 'WandbLoggerHook', 'MlflowLoggerHook',
                 'DvcliveLoggerHook', 'ClearMLLoggerHook')


def require_package(module: str, pip_name: str, hook_name: str) -> None:
    """Fail at build time, naming the pip package, when ``module`` is not installed.

    ``find_spec`` looks the package up without importing it, so building the
    hook stays cheap and a run without it never imports the client. A module
    already in ``sys.modules`` is the client, whatever it is: tests put a mock
    there (``sys.modules['mlflow'] = MagicMock()``, as mmcv 1.7.2's own tests
    do), and a mock has no ``__spec__`` for ``find_spec`` to read.
    """
    if sys.modules.get(module) is None and (
            module in sys.modules or importlib.util.find_spec(module) is None):
        raise ConfigError(
            f'{hook_name} needs the {pip_name} package, which is not installed here: run '
            f"`pip install {pip_name}` (or `pip install -e '.[trackers]'` in an mtrain "
            'checkout), or remove the hook from log_config.hooks.', key='type')


class TrackerLoggerHook(LoggerHook):
    """Base of the hooks that log to an experiment tracker through its own client.

    Subclasses set :attr:`client` and :attr:`pip_name` and implement
    :meth:`start`, :meth:`write` and :meth:`finish`; they may override
    :meth:`log_config` and :meth:`log_checkpoints`.

    A subclass's ``start`` returns the tracker's id for the run; it is saved
    in checkpoints (the hook's ``state_dict``) and, when training resumes,
    ``start`` is called with ``resumed=True`` and :attr:`run_id` set to it.
    Errors in ``start`` stop the run before training (a wrong project name
    should not cost a training run without curves); later errors are warned
    about once and then ignored.
    """

    #: The module imported in ``before_run`` (the tracker's Python client).
    client = ''
    #: The pip package that provides it.
    pip_name = ''

    def __init__(self, interval: int = 10, ignore_last: bool = True,
                 reset_flag: bool = False, by_epoch: bool = True) -> None:
        super().__init__(interval, ignore_last, reset_flag, by_epoch)
        require_package(self.client, self.pip_name, type(self).__name__)
        self.run_id: Optional[str] = None
        self._active = False  # started and not failed: log lines go out
        self._started = False

    # -- the three calls on the client --------------------------------------
    def start(self, runner, client: Any, resumed: bool) -> Optional[str]:
        """Start (or, ``resumed`` with :attr:`run_id` set, continue) a run; return its id."""
        raise NotImplementedError

    def write(self, tags: Dict[str, Any], step: int) -> None:
        """Send one log line's tags at ``step`` (iterations done)."""
        raise NotImplementedError

    def finish(self, runner) -> None:
        """Close the run (flush, upload what the options ask for)."""
        raise NotImplementedError

    def log_config(self, config: Dict[str, Any], config_text: str, resumed: bool) -> None:
        """Record the merged config; by default the tracker is not told."""

    # -- the stages ----------------------------------------------------------
    def before_run(self, runner) -> None:
        super().before_run(runner)
        if runner.rank != 0:
            return
        client = importlib.import_module(self.client)
        resumed = runner.log_buffer.restored  # (told by the resume, see LogBuffer.restored)
        try:
            self.run_id = self.start(runner, client, resumed)
        except ConfigError:
            raise
        except Exception as e:  # a wrong project, no login, no server: before training
            first = str(e).strip().splitlines()[0] if str(e).strip() else ''
            raise ConfigError(
                f'{type(self).__name__} could not start a {self.client} run: '
                f'{type(e).__name__}: {first}. Check the hook\'s arguments and the '
                f"{self.client} settings (docs/logging.md), or remove the hook.",
                key='log_config.hooks') from e
        self._active = self._started = True
        text = runner.meta.get('config') or ''
        self._guard(runner, 'record the config', self.log_config, config_dict(text), text,
                    resumed)

    def log(self, runner) -> None:
        if self._active:
            tags = self.loggable_tags(runner)
            if tags:
                self._guard(runner, f'log step {self.global_step}', self.write, tags,
                            self.global_step)

    def after_run(self, runner) -> None:
        if self._active:
            self._guard(runner, 'finish the run', self.finish, runner)
        elif self._started:  # failed earlier: still release what the client holds
            try:
                self.finish(runner)
            except Exception:  # already warned about once
                pass
        self._active = self._started = False

    def _guard(self, runner, what: str, call: Callable, *args: Any) -> None:
        try:
            call(*args)
        except Exception as e:  # a tracker must never stop training
            self._active = False
            runner.logger.warning(
                f'{type(self).__name__}: {self.client} failed to {what} '
                f'({type(e).__name__}: {e}). Nothing more is sent to {self.client} in this '
                'run; training goes on and the text and JSON logs stay complete.')

    # -- resume ---------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        # (a mocked client's id is a mock, which a checkpoint cannot pickle: not kept)
        return {'run_id': self.run_id} if isinstance(self.run_id, str) and self.run_id else {}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.run_id = state.get('run_id')


def config_dict(text: str) -> Dict[str, Any]:
    """The merged config (``runner.meta['config']``, a Python text) as a dict.

    Falls back to ``{'config': text}`` when the text is not a config file's
    (a config built in code), and ``{}`` without one (a runner built by hand).
    """
    if not text:
        return {}
    try:
        return Config.fromstring(text, '.py').to_dict()
    except Exception:  # any text mmengine cannot execute as a config
        return {'config': text}


def numbers_only(tags: Dict[str, Any]) -> Dict[str, float]:
    """The numeric tags (metrics stores that take no text)."""
    return {k: v for k, v in tags.items() if not isinstance(v, str)}


def checkpoint_files(runner) -> List[str]:
    """The run's final checkpoint and its best one(s) (``best_*.pth`` of ``save_best``)."""
    files = []
    last = runner.meta.get('hook_msgs', {}).get('last_ckpt')
    if last and osp.isfile(last):
        files.append(last)
    if runner.work_dir is not None:
        files += sorted(p for p in glob.glob(osp.join(runner.work_dir, 'best_*.pth'))
                        if p not in files)
    return files
