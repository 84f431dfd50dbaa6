"""Log lines as mmcv 1.7.2's loggers average them, checked against mmcv's own ``LogBuffer``.

mmcv's logger hooks call ``log_buffer.average(interval)`` at each line: every
key in ``val_history`` (cleared at each epoch's start) is averaged over its
latest ``interval`` values, so a loss a model logs only on some iterations
repeats its last value on a line where it was not logged.
"""

import glob
import importlib.util
import os

import pytest
import torch
from mmcv_python import candidates  # tests/mmcv_python.py
from torch import nn

from mtrain.hooks import Hook, OptimizerHook
from mtrain.hooks.logger.base import LoggerHook
from mtrain.runner import IterBasedRunner


def _mmcv_log_buffer():
    """mmcv 1.7.2's ``mmcv/runner/log_buffer.py`` (numpy only), loaded from its venv."""
    for python in candidates():
        venv = os.path.dirname(os.path.dirname(python))
        for path in glob.glob(f'{venv}/lib/python3*/site-packages/mmcv/runner/log_buffer.py'):
            spec = importlib.util.spec_from_file_location('mmcv_log_buffer', path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module.LogBuffer
    pytest.skip('needs mmcv 1.7.2 installed in a venv (tests/mmcv_python.py)')


class SparseLossModel(nn.Module):
    """Logs ``loss_aux`` only on every third iteration (an auxiliary head some batches feed)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 3)
        self.calls = 0

    def forward(self, img, gt_label=None):
        logits = self.fc(img)
        out = {'loss_cls': nn.functional.cross_entropy(logits, gt_label)}
        if self.calls % 3 == 0:
            out['loss_aux'] = logits.pow(2).mean() * 0.01
        self.calls += 1
        return out


class Lines(LoggerHook):
    def __init__(self, interval):
        super().__init__(interval=interval, by_epoch=False)
        self.lines = []

    def log(self, runner):
        self.lines.append((runner.iter + 1, dict(runner.log_buffer.output)))


class LogVars(Hook):
    priority = 'HIGHEST'

    def __init__(self):
        self.seen = []

    def after_train_iter(self, runner):
        self.seen.append(({k: float(v) for k, v in runner.outputs['log_vars'].items()},
                          runner.outputs['num_samples']))


def _run(runner, loader, interval, iters):
    lines, seen = Lines(interval), LogVars()
    for hook in (OptimizerHook(), lines, seen):
        runner.register_hook(hook)
    runner.run([loader], [('train', 1)], max_iters=iters)
    return lines.lines, seen.seen


def test_a_key_logged_on_some_iterations_averages_as_mmcv(tmp_path, logger, toy_loader):
    LogBuffer = _mmcv_log_buffer()
    model = SparseLossModel()
    runner = IterBasedRunner(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                             work_dir=str(tmp_path), logger=logger)
    lines, seen = _run(runner, toy_loader, interval=2, iters=8)
    mmcv = LogBuffer()
    expected = []
    for i, (values, count) in enumerate(seen):
        mmcv.update(values, count)
        if (i + 1) % 2 == 0:
            mmcv.average(2)
            expected.append((i + 1, dict(mmcv.output)))
    assert [it for it, _ in lines] == [it for it, _ in expected] == [2, 4, 6, 8]
    for (_, got), (_, want) in zip(lines, expected):
        assert set(got) == set(want) and 'loss_aux' in got  # the line at 6 repeats it
        for key in want:
            assert got[key] == pytest.approx(float(want[key]), rel=1e-12, abs=0), key


def test_a_second_run_in_one_process_does_not_average_the_first_runs_values(
        tmp_path, logger, toy_loader):
    # mmcv's before_epoch clears val_history; nothing was resumed, so the buffer is not kept.
    model = SparseLossModel()
    runner = IterBasedRunner(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                             work_dir=str(tmp_path), logger=logger)
    lines, seen = _run(runner, toy_loader, interval=2, iters=3)  # iteration 3 is never logged
    del lines[:], seen[:]
    runner.run([toy_loader], [('train', 1)], max_iters=6)
    assert lines[0][0] == 4
    assert lines[0][1]['loss_cls'] == seen[0][0]['loss_cls']  # iteration 4's alone


def test_a_tracker_is_told_resumed_by_a_resume_not_by_a_second_run(tmp_path, logger, toy_loader):
    from mtrain.hooks.logger.tracker import TrackerLoggerHook

    class Recorder(TrackerLoggerHook):
        client, pip_name = 'json', 'json'  # (any importable module: nothing is sent)

        def __init__(self):
            super().__init__(interval=2, by_epoch=False)
            self.starts = []

        def start(self, runner, client, resumed):
            self.starts.append(resumed)
            return 'run-1'

        def write(self, tags, step):
            pass

        def finish(self, runner):
            pass

    def runner_with(tracker, work_dir):
        model = SparseLossModel()
        runner = IterBasedRunner(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                                 work_dir=str(work_dir), logger=logger)
        runner.register_hook(OptimizerHook())
        runner.register_hook(tracker)
        return runner

    tracker, again = Recorder(), Recorder()
    runner = runner_with(tracker, tmp_path)
    runner.run([toy_loader], [('train', 1)], max_iters=2)
    runner.run([toy_loader], [('train', 1)], max_iters=4)  # a second run, not a resume
    runner.save_checkpoint(str(tmp_path), 'iter_4.pth')
    resumed = runner_with(again, tmp_path / 'again')
    resumed.resume(str(tmp_path / 'iter_4.pth'))
    resumed.run([toy_loader], [('train', 1)], max_iters=6)
    assert tracker.starts == [False, False] and again.starts == [True]
