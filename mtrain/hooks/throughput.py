"""Where the time goes: samples/s, the share spent waiting for data, FLOPs per iteration, MFU."""

import collections
import re
import time
from typing import Any, Dict, Optional, Tuple

import torch
from torch.utils.flop_counter import FlopCounterMode

from ..registry import HOOKS
from .hook import Hook

#: Dense peak FLOP/s of known CUDA devices (vendor data sheets, no sparsity), by the
#: dtype the matrix units run in. Looked up by a word of ``torch.cuda.get_device_name``,
#: first match wins (so 'H100 PCIe' comes before 'H100', 'L40S' before 'L4').
PEAK_FLOPS = (
    (r'H100 PCIe', {'bfloat16': 756.0e12, 'float16': 756.0e12, 'tfloat32': 378.0e12,
                    'float32': 51.2e12}),
    (r'H100|H200', {'bfloat16': 989.4e12, 'float16': 989.4e12, 'tfloat32': 494.7e12,
                    'float32': 66.9e12}),  # SXM; the H200 computes as fast
    (r'A100', {'bfloat16': 312.0e12, 'float16': 312.0e12, 'tfloat32': 156.0e12,
               'float32': 19.5e12}),
    (r'L40S', {'bfloat16': 362.1e12, 'float16': 362.1e12, 'tfloat32': 183.0e12,
               'float32': 91.6e12}),
    (r'L4', {'bfloat16': 121.0e12, 'float16': 121.0e12, 'tfloat32': 60.0e12,
             'float32': 30.3e12}),
    (r'V100', {'float16': 125.0e12, 'float32': 15.7e12}),
    (r'T4', {'float16': 65.0e12, 'float32': 8.1e12}),
)


def peak_flops(device: torch.device, dtype: Optional[torch.dtype]) -> Tuple[Optional[float], str]:
    """``(peak FLOP/s or None, what was looked up)`` for ``device`` computing in ``dtype``.

    ``dtype`` None is fp32, counted as TF32 where ``torch.get_float32_matmul_precision()``
    lets the matrix units use it. The CPU and unknown devices have no entry: their
    peak depends on the core count, clock and vector units, which torch does not report.
    """
    if device.type != 'cuda':
        return None, f'the {device.type}'
    name = torch.cuda.get_device_name(device)
    if dtype is None:
        key = 'float32' if torch.get_float32_matmul_precision() == 'highest' else 'tfloat32'
    else:
        key = str(dtype).replace('torch.', '')
    peak = table_peak(name, key)
    return peak, f'{name} in {key}' + ('' if peak else ' (not in PEAK_FLOPS)')


def table_peak(device_name: str, dtype: str) -> Optional[float]:
    """The :data:`PEAK_FLOPS` entry of ``device_name`` for ``dtype`` ('bfloat16', ...), or None."""
    for pattern, peaks in PEAK_FLOPS:
        if re.search(rf'\b(?:{pattern})\b', device_name):
            return peaks.get(dtype)
    return None


@HOOKS.register_module()
class ThroughputMonitorHook(Hook):
    """Log ``samples_per_s``, ``data_wait``, ``gflop_per_iter`` and ``mfu`` at each log line.

    Config (on in ``configs/_base_/default_runtime.py``)::

        custom_hooks = [dict(type='ThroughputMonitorHook', hint_threshold=0.3, hint_window=50)]

    The figures (docs/logging.md says how each is measured):

    - ``samples_per_s``: samples trained per second of wall time over the log
      interval, summed over ranks (``num_samples`` of the batch processor's outputs).
    - ``data_wait``: the share of the interval's wall time spent waiting for the
      next batch (as IterTimerHook's ``data_time``), averaged over ranks.
    - ``gflop_per_iter``: the FLOPs of one training iteration on one process,
      forward and backward, counted once with ``torch.utils.flop_counter.FlopCounterMode``
      around the first iteration this hook sees (matrix products, convolutions and
      attention only; element-wise work and the optimizer update are not counted).
    - ``mfu``: FLOPs per second over the device's dense peak for the training dtype
      (:data:`PEAK_FLOPS`, or ``peak_flops``); not logged where the peak is unknown (the CPU).

    When ``data_wait`` over the last ``hint_window`` iterations is above
    ``hint_threshold``, one warning line (once per run) says the loader is the
    bottleneck and what to change. Times are host clock readings, without a
    device synchronisation, as IterTimerHook's.

    Args:
        count_flops: count the FLOPs (and so log ``gflop_per_iter`` and ``mfu``).
        peak_flops: the device's peak FLOP/s, overriding the table (e.g. on a device not in it).
        hint_threshold: the data-wait share above which the hint is printed; None: never.
        hint_window: the number of iterations the hint's share is taken over.
    """

    priority = 'LOW'  # after the optimizer hook's backward, before the loggers

    def __init__(self, count_flops: bool = True, peak_flops: Optional[float] = None,
                 hint_threshold: Optional[float] = 0.3, hint_window: int = 50) -> None:
        if hint_threshold is not None and not 0 < hint_threshold < 1:
            raise ValueError(f'hint_threshold is a share of the iteration time, between 0 and '
                             f'1 (e.g. 0.3), or None for no hint; got {hint_threshold!r}')
        if not isinstance(hint_window, int) or hint_window < 1:
            raise ValueError(f'hint_window must be a positive number of iterations, got '
                             f'{hint_window!r}')
        self.count_flops = count_flops
        self.peak_flops = peak_flops
        self.hint_threshold = hint_threshold
        self.hint_window = hint_window
        #: FLOPs of one training iteration on this process, once counted.
        self.flops_per_iter: Optional[int] = None
        self.hinted = False
        self._clock = _Readings(hint_window)
        self._counter: Optional[FlopCounterMode] = None
        self._world_size = 1

    def before_run(self, runner) -> None:
        runner.log_buffer.add_source(self._take_sums)
        self._world_size = getattr(runner, 'world_size', 1)
        if self.peak_flops is None and self.count_flops:
            amp_dtype = getattr(getattr(runner, 'optim_step', None), 'amp_dtype', None)
            device = getattr(runner, 'device', torch.device('cpu'))  # a 1.x runner may lack it
            self.peak_flops, looked_up = peak_flops(device, amp_dtype)
            if self.peak_flops is None:
                runner.logger.info(f'ThroughputMonitorHook: no peak FLOP/s is known for '
                                   f'{looked_up}, so mfu is not logged; pass peak_flops=... '
                                   'to log it')

    def before_train_epoch(self, runner) -> None:
        self._clock.last = time.perf_counter()

    def after_val_epoch(self, runner) -> None:
        self._clock.last = time.perf_counter()  # a val phase is not data wait

    def before_train_iter(self, runner) -> None:
        clock = self._clock
        clock.data = time.perf_counter() - clock.last
        if self.count_flops and self.flops_per_iter is None and self._counter is None:
            self._counter = FlopCounterMode(display=False)
            self._counter.__enter__()

    def after_train_iter(self, runner) -> None:
        if self._counter is not None:
            self._stop_counting()
        clock = self._clock
        now = time.perf_counter()
        clock.add(clock.data, now - clock.last, (runner.outputs or {}).get('num_samples'))
        clock.last = now
        share = clock.window_share()
        if self.hint_threshold is not None and not self.hinted and share is not None \
                and share > self.hint_threshold:
            self.hinted = True
            runner.logger.warning(_hint(share, self.hint_window, self.hint_threshold, runner))

    def after_run(self, runner) -> None:
        if self._counter is not None:  # the first iteration raised
            self._counter.__exit__(None, None, None)
            self._counter = None

    def _stop_counting(self) -> None:
        counter, self._counter = self._counter, None
        counter.__exit__(None, None, None)
        self.flops_per_iter = int(counter.get_total_flops())

    def _take_sums(self) -> Dict[str, Tuple[float, int]]:
        """The interval's figures as ``(value * 1, 1)`` per rank, for the log buffer.

        The buffer sums ``(total, count)`` over ranks, then divides: each figure
        is the mean over ranks, but ``samples_per_s``, the sum (its total is
        multiplied by the world size).
        """
        clock = self._clock
        count, wall, data, samples = clock.take()
        if not count or wall <= 0:
            return {}
        sums = {'data_wait': (data / wall, 1)}
        if samples is not None:
            sums['samples_per_s'] = (samples / wall * self._world_size, 1)
        if self.flops_per_iter is not None:
            sums['gflop_per_iter'] = (self.flops_per_iter / 1e9, 1)
            if self.peak_flops:
                sums['mfu'] = (self.flops_per_iter * count / wall / self.peak_flops, 1)
        return sums


def _hint(share: float, window: int, threshold: float, runner) -> str:
    workers = getattr(runner.data_loader, 'num_workers', None)
    return (f'ThroughputMonitorHook: the data loader is the bottleneck: {share:.0%} of the '
            f'last {window} iterations was spent waiting for data (threshold '
            f'{threshold:.0%}); raise data.workers_per_gpu (now {workers}), set '
            'persistent_workers=True and pin_memory=True, or make the pipeline cheaper.')


class _Readings:
    """The clock readings: the interval's sums and the hint's window of recent iterations.

    An object of its own, as IterTimerHook's sums (``Hook.__setattr__`` watches
    attribute writes on a hook).
    """

    __slots__ = ('last', 'data', 'sum_time', 'sum_data', 'samples', 'count', 'window',
                 'window_time', 'window_data')

    def __init__(self, window: int) -> None:
        self.last = self.data = self.sum_time = self.sum_data = 0.
        self.samples: Optional[int] = 0
        self.count = 0
        self.window: collections.deque = collections.deque(maxlen=window)
        self.window_time = self.window_data = 0.

    def add(self, data: float, wall: float, samples: Any) -> None:
        self.sum_data += data
        self.sum_time += wall
        self.count += 1
        if self.samples is not None:
            self.samples = None if samples is None else self.samples + int(samples)
        if len(self.window) == self.window.maxlen:
            old_data, old_wall = self.window[0]
            self.window_data -= old_data
            self.window_time -= old_wall
        self.window.append((data, wall))
        self.window_data += data
        self.window_time += wall

    def window_share(self) -> Optional[float]:
        """The data-wait share of the last ``window`` iterations (None until that many ran)."""
        if len(self.window) < self.window.maxlen or self.window_time <= 0:
            return None
        return self.window_data / self.window_time

    def take(self) -> Tuple[int, float, float, Optional[int]]:
        """``(iterations, wall time, data wait, samples)`` since the last call; start again."""
        taken = self.count, self.sum_time, self.sum_data, self.samples
        self.count, self.sum_time, self.sum_data, self.samples = 0, 0., 0., 0
        return taken
