"""The logger hook base: when a log line is due, and what goes in it.

Values wait in ``runner.log_buffer`` as device-side sums; a logger reads them
(one host sync) only at its interval. Concrete loggers implement ``log``.
"""

from collections import OrderedDict
from typing import Any, Dict

import torch

from ..hook import Hook


class LoggerHook(Hook):
    """Average the log buffer every ``interval`` iterations and write it.

    Args:
        interval: iterations between lines (``log_config.interval``).
        ignore_last: skip the partial interval at an epoch's end (except in an
            epoch shorter than ``interval``, which still logs once at its end).
        reset_flag: clear the buffer's output after logging (the last logger
            registered does this, so all loggers see the same values).
        by_epoch: count the interval within the epoch (``EpochBasedRunner``)
            or over the whole run.
    """

    priority = 'VERY_LOW'

    def __init__(self, interval: int = 10, ignore_last: bool = True,
                 reset_flag: bool = False, by_epoch: bool = True) -> None:
        if not isinstance(interval, int) or interval <= 0:
            raise ValueError(f'log interval must be a positive integer, got {interval!r}')
        self.interval = interval
        self.ignore_last = ignore_last
        self.reset_flag = reset_flag
        self.by_epoch = by_epoch

    def log(self, runner) -> None:
        raise NotImplementedError

    def before_run(self, runner) -> None:
        for hook in reversed(runner.hooks):
            if isinstance(hook, LoggerHook):
                hook.reset_flag = True
                break

    def before_epoch(self, runner) -> None:
        runner.log_buffer.clear()  # values of the last epoch's partial interval

    def after_train_iter(self, runner) -> None:
        done = (runner.inner_iter if self.by_epoch else runner.iter) + 1
        # An epoch shorter than the interval still logs once, at its end (mmcv 1.x: never).
        short_epoch = self.by_epoch and done < self.interval and self.end_of_epoch(runner)
        if done % self.interval == 0 or short_epoch or (
                not self.ignore_last and self.end_of_epoch(runner)):
            runner.log_buffer.average(runner.reduce_log_values)
        if runner.log_buffer.ready:
            self._log_and_reset(runner)

    def after_train_epoch(self, runner) -> None:
        if runner.log_buffer.ready:
            self._log_and_reset(runner)

    def after_val_epoch(self, runner) -> None:
        runner.log_buffer.average(runner.reduce_log_values)
        self._log_and_reset(runner)

    def _log_and_reset(self, runner) -> None:
        self.log(runner)
        if self.reset_flag:
            runner.log_buffer.clear_output()

    # -- what a line holds ---------------------------------------------------
    def get_mode(self, runner) -> str:
        if runner.mode == 'train':
            return 'train' if 'time' in runner.log_buffer.output else 'val'
        if runner.mode == 'val':
            return 'val'
        raise ValueError(f"runner mode should be 'train' or 'val', not {runner.mode!r}")

    def get_epoch(self, runner) -> int:
        return runner.epoch + 1 if runner.mode == 'train' else runner.epoch

    def get_iter(self, runner, inner_iter: bool = False) -> int:
        if self.by_epoch and inner_iter:
            return runner.inner_iter + 1
        return runner.iter + 1

    def log_dict(self, runner) -> Dict[str, Any]:
        """The mmcv 1.x line: mode, epoch, iter, lr, (memory), then the buffer."""
        output = runner.log_buffer.output
        cur_iter = output.pop('eval_iter_num', None) or self.get_iter(runner, inner_iter=True)
        line = OrderedDict(mode=self.get_mode(runner), epoch=self.get_epoch(runner),
                           iter=cur_iter)
        if runner.optimizer is not None:
            lrs = runner.current_lr()  # {name: [...]} for a dict of optimizers, as in mmcv
            line['lr'] = ({k: v[0] for k, v in lrs.items()} if isinstance(lrs, dict)
                          else lrs[0])
        if 'time' in output and torch.cuda.is_available() and runner.device.type == 'cuda':
            line['memory'] = int(torch.cuda.max_memory_allocated(runner.device) / 2**20)
        line.update(output)
        return line
