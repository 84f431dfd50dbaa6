"""The logger hook base: when a log line is due, and what goes in it.

Values wait in ``runner.log_buffer`` as device-side sums; a logger reads them
(one host sync) only at its interval. Concrete loggers implement ``log``;
those that write scalars somewhere (TensorBoard, the experiment trackers)
take them from :meth:`LoggerHook.loggable_tags` at :attr:`LoggerHook.global_step`.
"""

import numbers
from collections import OrderedDict
from typing import Any, Dict, List, Union

import numpy as np
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
    _loader, _length, _log_at_end = None, 0, False  # see _ends_epoch

    def __init__(self, interval: int = 10, ignore_last: bool = True,
                 reset_flag: bool = False, by_epoch: bool = True) -> None:
        if not isinstance(interval, int) or interval <= 0:
            raise ValueError(f'log interval must be a positive integer, got {interval!r}')
        self.interval = interval
        self.ignore_last = ignore_last
        self.reset_flag = reset_flag
        self.by_epoch = by_epoch
        #: Iterations done when the line being logged was written: the step
        #: every scalar logger uses, continuous across a resume.
        self.global_step = 0

    def log(self, runner) -> None:
        """Rank-local: write the current line (``runner.log_buffer.output``).

        1.x logger hooks decorate their ``log`` with ``@master_only``, so it
        may run on rank 0 alone: it holds no collective. The ranks' values
        were combined before it, in :meth:`after_train_iter` /
        :meth:`after_val_epoch` (collective, every rank).
        """
        raise NotImplementedError

    def before_run(self, runner) -> None:
        for hook in reversed(runner.hooks):
            if isinstance(hook, LoggerHook):
                hook.reset_flag = True
                break

    def before_epoch(self, runner) -> None:
        # The values of the last epoch (or run) go, as mmcv's before_epoch clears. A run
        # resumed mid-epoch (IterBasedRunner: any resume, its one "epoch" is the run) keeps
        # the checkpoint's values, so its first line averages the same iterations as the
        # uninterrupted run's. Told, not inferred: the buffer says it holds a checkpoint's
        # values (a second run() in one process, at runner.iter > 0, does not).
        resumed_mid_epoch = runner.log_buffer.restored and (
            runner.max_epochs is None or getattr(runner, '_start_inner_iter', 0))
        if not resumed_mid_epoch:
            runner.log_buffer.clear()

    def after_train_iter(self, runner) -> None:
        """Collective: every rank calls it, as in mmcv; a due line sums the ranks' values."""
        inner = runner.inner_iter
        done = (inner if self.by_epoch else runner.iter) + 1
        if done % self.interval == 0 or (runner.data_loader is not self._loader
                                         or self._log_at_end) and self._ends_epoch(runner):
            # mmcv's average(interval): each key's latest `interval` values
            runner.log_buffer.average_interval(runner.reduce_log_values, self.interval)
        if runner.log_buffer.ready:
            # Inside an iteration the runner has not counted the current one yet.
            self._log_and_reset(runner, runner.iter + 1)

    def _ends_epoch(self, runner) -> bool:
        """Whether a partial interval is logged now, at the end of the epoch.

        With ``ignore_last=False``; and with ``by_epoch`` in an epoch shorter
        than the interval, which still logs once (mmcv 1.x: never). The
        loader's length is asked once per loader (``len`` of a loader is slow).
        """
        loader = runner.data_loader
        if loader is not self._loader:
            self._loader, self._length = loader, len(loader)
            self._log_at_end = not self.ignore_last or self.by_epoch and self._length < self.interval
        return self._log_at_end and runner.inner_iter + 1 == self._length

    def after_train_epoch(self, runner) -> None:
        if runner.log_buffer.ready:
            self._log_and_reset(runner, runner.iter)

    def after_val_epoch(self, runner) -> None:
        """Collective: every rank calls it; the val phase's values summed over the ranks."""
        runner.log_buffer.average_interval(runner.reduce_log_values)
        self._log_and_reset(runner, runner.iter)

    def _log_and_reset(self, runner, step: int) -> None:
        self.global_step = step
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
        if 'time' in output and runner.device.type == 'cuda':  # (is_available() costs ~30 µs)
            line['memory'] = int(torch.cuda.max_memory_allocated(runner.device) / 2**20)
        line.update(output)
        return line

    # -- mmcv 1.7.2's tag helpers, which 1.x logger hooks' log() call ----------
    @staticmethod
    def is_scalar(val: Any, include_np: bool = True, include_torch: bool = True) -> bool:
        """mmcv's: a number, a 0-d numpy array, or a torch tensor of length 1."""
        if isinstance(val, numbers.Number):
            return True
        if include_np and isinstance(val, np.ndarray) and val.ndim == 0:
            return True
        return include_torch and isinstance(val, torch.Tensor) and len(val) == 1

    def get_lr_tags(self, runner) -> Dict[str, float]:
        """mmcv's: ``learning_rate`` (``learning_rate/<name>`` per optimizer of a dict)."""
        return _per_optimizer('learning_rate', runner.current_lr())

    def get_momentum_tags(self, runner) -> Dict[str, float]:
        """mmcv's: ``momentum`` (``momentum/<name>`` per optimizer of a dict)."""
        return _per_optimizer('momentum', runner.current_momentum())

    def get_loggable_tags(self, runner, allow_scalar: bool = True, allow_text: bool = False,
                          add_mode: bool = True,
                          tags_to_skip: tuple = ('time', 'data_time')) -> Dict[str, Any]:
        """mmcv 1.7.2's tags of the current line, as every 1.x logger hook's ``log()`` reads them.

        Each value of ``runner.log_buffer.output`` but ``tags_to_skip`` (scalars
        unless ``allow_scalar=False``, texts only with ``allow_text=True``,
        other values as they are), as ``<mode>/<name>`` with ``add_mode``; then
        :meth:`get_lr_tags` and :meth:`get_momentum_tags`. mtrain's own
        loggers use :meth:`loggable_tags`, which adds ``train/loss_scale``.
        """
        tags: Dict[str, Any] = {}
        for var, val in runner.log_buffer.output.items():
            if var in tags_to_skip:
                continue
            if self.is_scalar(val) and not allow_scalar:
                continue
            if isinstance(val, str) and not allow_text:
                continue
            if add_mode:
                var = f'{self.get_mode(runner)}/{var}'
            tags[var] = val
        tags.update(self.get_lr_tags(runner))
        tags.update(self.get_momentum_tags(runner))
        return tags

    def loggable_tags(self, runner) -> Dict[str, Any]:
        """The current line as mmcv 1.x's tags: what TensorBoard and the trackers write.

        ``train/<name>`` or ``val/<name>`` for each logged number or string
        (losses, per-task losses, ``grad_norm``, metrics...; not ``time`` and
        ``data_time``, as in mmcv), ``learning_rate`` and ``momentum`` of the
        first param group (``learning_rate/<name>`` per optimizer of a dict),
        and ``train/loss_scale`` under an fp16 optimizer hook with a ``GradScaler``.
        """
        mode = self.get_mode(runner)
        tags: Dict[str, Any] = {}
        for name, value in runner.log_buffer.output.items():
            if name in ('time', 'data_time') or not _loggable(value):
                continue
            tags[f'{mode}/{name}'] = value.item() if isinstance(value, np.generic) else value
        if runner.optimizer is not None:
            tags.update(_per_optimizer('learning_rate', runner.current_lr()))
            tags.update(_per_optimizer('momentum', runner.current_momentum()))
        scaler = getattr(runner.optim_step, 'scaler', None)
        if scaler is not None and mode == 'train':
            tags['train/loss_scale'] = scaler.get_scale()  # one host read per log line
        return tags


def _loggable(value: Any) -> bool:
    """A number (numpy scalars too, as mmcv's ``is_scalar``) or a text; not a bool."""
    return isinstance(value, (numbers.Number, str)) and not isinstance(value, (bool, np.bool_))


def _per_optimizer(tag: str, values: Union[List[float], Dict[str, List[float]]]
                   ) -> Dict[str, float]:
    """``{tag: first group's value}``, or ``{tag/name: ...}`` for a dict of optimizers."""
    if isinstance(values, dict):
        return {f'{tag}/{name}': v[0] for name, v in values.items() if v}
    return {tag: values[0]} if values else {}
