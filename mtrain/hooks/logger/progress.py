"""A progress bar with an ETA on a terminal; plain progress lines anywhere else."""

import contextlib
import datetime
import logging
import sys
import time
from typing import Any, Dict, Optional, Sequence, TextIO

from ...registry import HOOKS
from .base import LoggerHook


@HOOKS.register_module()
class ProgressBarHook(LoggerHook):
    """Show how far the run is and when it will end.

    A separate logger hook rather than a mode of :class:`TextLoggerHook`: the
    text logger writes the record (the ``.log`` and ``.log.json`` files) and
    should read the same everywhere; this hook only shows progress, and
    decides how by where its output goes:

    - an interactive terminal (``stream.isatty()``): a tqdm bar over the whole
      run (iterations done / total, rate, elapsed and ETA), advanced every
      iteration, with the epoch in its description and the last logged
      values (``keys``) after it, refreshed every ``interval`` iterations.
      While the bar is shown, the runner's console log lines are written
      above it (``tqdm.contrib.logging``) instead of breaking it.
    - anything else (CI, a file, a pipe): one plain line every ``interval``
      iterations and one at the end, e.g.
      ``progress: 120/450 iters (26.7%), 41.3 it/s, elapsed 0:00:02, eta 0:00:07, loss: 0.4183``.

    Config::

        log_config = dict(interval=10, hooks=[dict(type='TextLoggerHook'),
                                              dict(type='ProgressBarHook')])

    Args:
        keys: logged values to show next to the progress (those present).
        stream: where to write. Default: ``sys.stderr`` when the run starts.
        tty: force the bar (True) or the plain lines (False); None decides by
            ``stream.isatty()``.
        interval, ignore_last, reset_flag, by_epoch: see :class:`LoggerHook`.
    """

    def __init__(self, keys: Sequence[str] = ('loss', 'accuracy'), stream: Optional[TextIO] = None,
                 tty: Optional[bool] = None, interval: int = 10, ignore_last: bool = True,
                 reset_flag: bool = False, by_epoch: bool = True) -> None:
        super().__init__(interval, ignore_last, reset_flag, by_epoch)
        self.keys = tuple(keys)
        self.stream = stream
        self.tty = tty
        self.bar = None
        self._shown: Dict[str, Any] = {}
        self._exit_stack = contextlib.ExitStack()

    def before_run(self, runner) -> None:
        super().before_run(runner)
        if runner.rank != 0:
            self.tty = False
            return
        if self.stream is None:
            self.stream = sys.stderr
        if self.tty is None:
            self.tty = bool(getattr(self.stream, 'isatty', lambda: False)())
        self._start_time, self._start_iter = time.perf_counter(), runner.iter
        if self.tty:
            self._open_bar(runner)

    def _open_bar(self, runner) -> None:
        # Imported here: only an interactive run draws a bar.
        from tqdm import tqdm
        from tqdm.contrib.logging import logging_redirect_tqdm
        self.bar = tqdm(total=runner.max_iters, initial=runner.iter, file=self.stream,
                        unit='it', dynamic_ncols=True, leave=True)
        if any(isinstance(h, logging.StreamHandler) and h.stream in (sys.stdout, sys.stderr)
               for h in runner.logger.handlers):  # else tqdm would add a console handler
            self._exit_stack.enter_context(logging_redirect_tqdm([runner.logger]))

    def before_train_epoch(self, runner) -> None:
        super().before_train_epoch(runner)
        if self.bar is not None and runner.max_epochs is not None:
            self.bar.set_description(f'Epoch {runner.epoch + 1}/{runner.max_epochs}',
                                     refresh=False)

    def after_train_iter(self, runner) -> None:
        super().after_train_iter(runner)  # a log line due now updates the values shown
        if self.bar is not None:
            self.bar.update(1)  # tqdm redraws at most every 0.1 s
        elif runner.rank == 0 and (self.every_n_iters(runner, self.interval)
                                   or self.is_last_iter(runner)):
            self._print_line(runner)

    def log(self, runner) -> None:
        """Remember the values to show (the log buffer's output at a log line)."""
        output = runner.log_buffer.output
        prefix = '' if self.get_mode(runner) == 'train' else 'val_'
        for key in self.keys:
            if isinstance(output.get(key), (int, float)):
                self._shown[prefix + key] = output[key]
        if self.bar is not None:
            self.bar.set_postfix({k: f'{v:.4g}' for k, v in self._shown.items()},
                                 refresh=False)

    def _print_line(self, runner) -> None:
        done = runner.iter + 1 - self._start_iter
        elapsed = time.perf_counter() - self._start_time
        rate = done / elapsed if elapsed > 0 else 0.0
        left = runner.max_iters - runner.iter - 1
        eta = datetime.timedelta(seconds=int(left / rate)) if rate else '?'
        values = ''.join(f', {k}: {v:.4f}' for k, v in self._shown.items())
        print(f'progress: {runner.iter + 1}/{runner.max_iters} iters '
              f'({100 * (runner.iter + 1) / runner.max_iters:.1f}%), {rate:.1f} it/s, '
              f'elapsed {datetime.timedelta(seconds=int(elapsed))}, eta {eta}{values}',
              file=self.stream, flush=True)

    def after_run(self, runner) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        self._exit_stack.close()  # console logging goes back to its own handler
