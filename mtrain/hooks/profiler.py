"""Profile a window of iterations with ``torch.profiler``; write a Chrome / TensorBoard trace."""

import os
import os.path as osp
import time
from typing import List, Optional, Sequence

import torch
from torch.autograd.profiler import record_function

from ..registry import HOOKS
from .hook import Hook

SECTIONS = ('data_loading', 'forward', 'backward', 'optimizer_step')


@HOOKS.register_module()
class ProfilerHook(Hook):
    """Record ``num_iters`` training iterations from iteration ``start`` with ``torch.profiler``.

    Each profiled iteration is cut into named sections (``record_function``
    ranges, shown as their own rows above the operators they contain):

    - ``data_loading``: from the end of the previous iteration's hooks to the
      start of this one's, i.e. fetching the batch plus the
      ``before_train_iter`` hooks (what ``data_time`` measures too);
    - ``forward``: the model call (``before_forward`` → ``after_forward``);
    - ``backward``: ``loss.backward()`` (``before_backward`` → ``after_backward``);
    - ``optimizer_step``: clipping and ``optimizer.step()``
      (``before_optimizer_step`` → the optimizer's step post-hook).

    When the window ends, the trace is written to
    ``<out_dir>/rank<R>.<time>.pt.trace.json``, which ``chrome://tracing``,
    https://ui.perfetto.dev and TensorBoard's profiler plugin
    (``tensorboard --logdir <out_dir>``) open, and the operators that took
    the most time are logged as a table. Outside the window the hook does a
    comparison per stage and nothing else.

    Config::

        custom_hooks = [dict(type='ProfilerHook', start=10, num_iters=5)]

    Args:
        start: the first profiled iteration (0-based, counted over the whole
            run). Default 1: the first iteration's one-off costs stay out.
        num_iters: how many iterations to record. Default 5.
        activities: ``'cpu'`` and/or ``'cuda'``. Default: the CPU, plus CUDA
            when the model is on a GPU.
        record_shapes, profile_memory, with_stack: ``torch.profiler.profile``
            options (each makes the trace larger). Default False.
        out_dir: where the trace goes. Default: ``<work_dir>/profiler``.
        row_limit: rows of the logged operator table (0: no table). Default 15.
    """

    priority = 'LOWEST'  # its after_train_iter runs last: the step is done when a window ends

    def __init__(self, start: int = 1, num_iters: int = 5,
                 activities: Optional[Sequence[str]] = None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False,
                 out_dir: Optional[str] = None, row_limit: int = 15) -> None:
        if not isinstance(start, int) or start < 0:
            raise ValueError(f'ProfilerHook start must be an iteration number >= 0, got {start!r}')
        if not isinstance(num_iters, int) or num_iters <= 0:
            raise ValueError(f'ProfilerHook num_iters must be a positive integer, '
                             f'got {num_iters!r}')
        for name in activities or ():
            if name not in ('cpu', 'cuda'):
                raise ValueError(f"ProfilerHook activities are 'cpu' and 'cuda', got {name!r}")
        self.start, self.num_iters = start, num_iters
        self.activities = activities
        self.options = dict(record_shapes=record_shapes, profile_memory=profile_memory,
                            with_stack=with_stack)
        self.out_dir = out_dir
        self.row_limit = row_limit
        self.trace_path: Optional[str] = None
        self._profiler = None
        self._range = None
        self._step_handle = None

    # -- the window ----------------------------------------------------------
    def before_run(self, runner) -> None:
        if self.out_dir is None and runner.work_dir is not None:
            self.out_dir = osp.join(runner.work_dir, 'profiler')
        if self.out_dir is None:
            raise ValueError('ProfilerHook needs an out_dir when the runner has no work_dir')
        if runner.iter == self.start:
            self._begin(runner)
            self._open_range('data_loading')

    def after_train_iter(self, runner) -> None:
        self._close_range()
        if self._profiler is not None and runner.iter + 1 >= self.start + self.num_iters:
            self._end(runner)
        elif self._profiler is None and runner.iter + 1 == self.start:
            self._begin(runner)
        if self._profiler is not None:
            self._open_range('data_loading')

    def after_run(self, runner) -> None:
        if self._profiler is not None:  # the run ended inside the window
            self._end(runner)

    def _begin(self, runner) -> None:
        self._profiler = torch.profiler.profile(activities=self._activities(runner),
                                                **self.options)
        self._profiler.start()
        if not isinstance(runner.optimizer, dict) and runner.optimizer is not None:
            self._step_handle = runner.optimizer.register_step_post_hook(
                lambda optimizer, args, kwargs: self._close_range())

    def _end(self, runner) -> None:
        self._close_range()
        if self._step_handle is not None:
            self._step_handle.remove()
            self._step_handle = None
        profiler, self._profiler = self._profiler, None
        profiler.stop()
        self._write(profiler, runner)  # every rank: its own trace, named by rank

    def _write(self, profiler, runner) -> None:
        os.makedirs(self.out_dir, exist_ok=True)
        # <worker>.<time>.pt.trace.json: the layout TensorBoard's profiler plugin reads.
        name = f'rank{runner.rank}.{time.time_ns()}.pt.trace.json'
        self.trace_path = osp.join(self.out_dir, name)
        profiler.export_chrome_trace(self.trace_path)
        runner.logger.info(f'profiled iterations {self.start + 1}-{runner.iter + 1}; trace: '
                           f'{self.trace_path} (open it in https://ui.perfetto.dev or '
                           'chrome://tracing)')
        if self.row_limit:
            table = profiler.key_averages().table(sort_by='self_cpu_time_total',
                                                  row_limit=self.row_limit)
            runner.logger.info('operators by self CPU time:\n' + table)

    def _activities(self, runner) -> List[torch.profiler.ProfilerActivity]:
        names = self.activities or (['cpu', 'cuda'] if runner.device.type == 'cuda' else ['cpu'])
        return [getattr(torch.profiler.ProfilerActivity, n.upper()) for n in names]

    # -- the sections ---------------------------------------------------------
    def before_train_iter(self, runner) -> None:
        self._close_range()  # the batch is here: data_loading ends

    def before_forward(self, runner) -> None:
        self._open_range('forward')

    def after_forward(self, runner) -> None:
        self._close_range()

    def before_backward(self, runner) -> None:
        self._open_range('backward')

    def after_backward(self, runner) -> None:
        self._close_range()

    def before_optimizer_step(self, runner) -> None:
        self._open_range('optimizer_step')

    def _open_range(self, name: str) -> None:
        if self._profiler is None:
            return
        self._close_range()
        self._range = record_function(name)
        self._range.__enter__()

    def _close_range(self) -> None:
        if self._range is not None:
            self._range.__exit__(None, None, None)
            self._range = None
