"""Readable log lines and an mmcv-format ``<timestamp>.log.json``.

Each logged line is also one JSON object per line in
``work_dir/<timestamp>.log.json`` (``mode``, ``epoch``, ``iter``, ``lr``,
losses, ``time``, ``data_time``; metrics on ``val`` lines), the format
mmcv 1.x's log-analysis scripts read. The first line holds the run's meta
(config text, seed, environment).
"""

import datetime
import json
import os.path as osp
from collections import OrderedDict
from typing import Any, Dict

import numpy as np
import torch

from ...registry import HOOKS
from .base import LoggerHook

_NOT_SHOWN = ('mode', 'Epoch', 'iter', 'lr', 'time', 'data_time', 'memory', 'epoch')


@HOOKS.register_module()
class TextLoggerHook(LoggerHook):
    """Log lines like ``Epoch [1][10/45]  lr: 1.000e-02, eta: 0:00:12, ... loss: 0.3``.

    Config::

        log_config = dict(interval=10, hooks=[dict(type='TextLoggerHook')])

    Args:
        interval, ignore_last, reset_flag, by_epoch: see :class:`LoggerHook`.
        interval_exp_name: repeat the experiment name every this many lines.
        out_dir: where the ``.log.json`` goes (default: the work dir).
    """

    def __init__(self, by_epoch: bool = True, interval: int = 10, ignore_last: bool = True,
                 reset_flag: bool = False, interval_exp_name: int = 1000,
                 out_dir: str = None) -> None:
        super().__init__(interval, ignore_last, reset_flag, by_epoch)
        self.time_sec_tot = 0.0
        self.interval_exp_name = interval_exp_name
        self.out_dir = out_dir
        self.json_log_path = None
        self._json_file = None  # open for the whole run: one write per line, no reopening

    def before_run(self, runner) -> None:
        super().before_run(runner)
        self.start_iter = runner.iter
        out_dir = self.out_dir or runner.work_dir
        if out_dir is not None and runner.rank == 0:
            self._close_json()  # a hook reused for a second run
            self.json_log_path = osp.join(out_dir, f'{runner.timestamp}.log.json')
            self._json_file = open(self.json_log_path, 'a', buffering=1)  # line-buffered
            if runner.meta:
                self._dump(runner.meta)

    def after_run(self, runner) -> None:
        self._close_json()

    def _close_json(self) -> None:
        if self._json_file is not None:
            self._json_file.close()
            self._json_file = None

    def log(self, runner) -> None:
        line = self.log_dict(runner)
        runner.logger.info(self._format(line, runner))
        self._dump(line)

    def _format(self, line: Dict[str, Any], runner) -> str:
        if line['mode'] == 'train':
            if self.by_epoch:
                text = f'Epoch [{line["epoch"]}][{line["iter"]}/{len(runner.data_loader)}]\t'
            else:
                text = f'Iter [{line["iter"]}/{runner.max_iters}]\t'
            if isinstance(line.get('lr'), dict):
                text += ' '.join(f'lr_{k}: {v:.3e}' for k, v in line['lr'].items()) + ', '
            elif 'lr' in line:
                text += f'lr: {line["lr"]:.3e}, '
            if 'time' in line:
                text += self._timing(line, runner)
        else:
            text = (f'Epoch({line["mode"]}) [{line["epoch"]}][{line["iter"]}]\t'
                    if self.by_epoch else f'Iter({line["mode"]}) [{line["iter"]}]\t')
        items = [f'{name}: {val:.4f}' if isinstance(val, float) else f'{name}: {val}'
                 for name, val in line.items() if name not in _NOT_SHOWN]
        return text + ', '.join(items)

    def _timing(self, line: Dict[str, Any], runner) -> str:
        self.time_sec_tot += line['time'] * self.interval
        time_sec_avg = self.time_sec_tot / (runner.iter - self.start_iter + 1)
        eta = datetime.timedelta(seconds=int(time_sec_avg * (runner.max_iters - runner.iter - 1)))
        text = f'eta: {eta}, time: {line["time"]:.3f}, data_time: {line["data_time"]:.3f}, '
        if 'memory' in line:
            text += f'memory: {line["memory"]}, '
        return text

    def _dump(self, record: Dict[str, Any]) -> None:
        if self._json_file is None:
            return
        rounded = OrderedDict((k, _round(v)) for k, v in record.items())
        self._json_file.write(_JSON.encode(rounded) + '\n')


def _plain(value: Any) -> Any:
    """A value ``json`` cannot write, as mmcv 1.7.2's json dump writes it.

    numpy scalars (an evaluation hook's ``np.float32`` metric) as plain
    numbers, arrays, sets and ranges as lists; tensors as numbers or lists.
    Anything else as its text, so that a log line never stops a run.
    """
    if isinstance(value, (set, range)):
        return list(value)
    if isinstance(value, (np.ndarray, np.generic, torch.Tensor)):
        return value.tolist()
    return str(value)


#: ``json.dumps(record, default=_plain)`` without making an encoder for every line.
_JSON = json.JSONEncoder(default=_plain)


def _round(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 5)
    if isinstance(value, (list, tuple)):
        return [_round(v) for v in value]
    return value
