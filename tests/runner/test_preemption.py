"""SIGTERM/SIGINT: finish the iteration, checkpoint, raise Preempted; resuming is exact."""

import os
import signal

import pytest
import torch

from mtrain.hooks import Hook, OptimizerHook
from mtrain.runner import Preempted


class SendSignal(Hook):
    def __init__(self, at_iter, signum):
        self.at_iter, self.signum = at_iter, signum

    def after_train_iter(self, runner):
        if runner.iter + 1 == self.at_iter:
            os.kill(os.getpid(), self.signum)


@pytest.mark.parametrize('signum', [signal.SIGTERM, signal.SIGINT])
def test_signal_saves_a_checkpoint_that_resumes_exactly(make_runner, toy_loader, tmp_path, signum):
    full = make_runner(max_len=2, momentum=0.9)
    full.register_hook(OptimizerHook())
    full.run([toy_loader], [('train', 1)])

    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        first = make_runner(max_len=2, momentum=0.9)
        first.register_hook(OptimizerHook())
        first.register_hook(SendSignal(11, signum))
        first.stop_on_signals()
        with pytest.raises(Preempted, match='--auto-resume') as err:
            first.run([toy_loader], [('train', 1)])
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    assert err.value.iteration == 11 and err.value.checkpoint.endswith('iter_11.pth')
    resumed = make_runner(max_len=2, momentum=0.9)
    resumed.register_hook(OptimizerHook())
    resumed.resume(err.value.checkpoint)
    resumed.run([toy_loader], [('train', 1)])
    for a, b in zip(full.model.parameters(), resumed.model.parameters()):
        assert torch.equal(a, b)


def test_signal_handlers_are_restored_after_run(make_runner, toy_loader):
    # Python's own Ctrl-C handler to start from: a library imported by an earlier test in
    # this worker process (a tracker client) may have installed one of its own.
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
        runner = make_runner(max_len=1)
        runner.register_hook(OptimizerHook())
        runner.stop_on_signals()
        runner.run([toy_loader], [('train', 1)])
        assert {s: signal.getsignal(s) for s in before} == before
        with pytest.raises(KeyboardInterrupt):  # Ctrl-C works again after the run
            os.kill(os.getpid(), signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, outer)


class FailsBeforeRun(Hook):
    def before_run(self, runner):
        raise RuntimeError('a hook of the user fails before the loop')


@pytest.mark.parametrize('by_epoch', [True, False])
@pytest.mark.parametrize('failure', ['hook', 'workflow'])
def test_signal_handlers_are_restored_when_the_run_fails_before_its_loop(
        make_runner, toy_loader, by_epoch, failure):
    """A run that never reaches its loop (a hook's before_run raising, a bad workflow)
    leaves Ctrl-C as it found it, for whoever called it in this process (a notebook)."""
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
        runner = make_runner(by_epoch=by_epoch, max_len=2)
        runner.register_hook(OptimizerHook())
        if failure == 'hook':
            runner.register_hook(FailsBeforeRun())
        workflow = [('train', 1)] if failure == 'hook' else [('train', 1), ('val', 1)]
        runner.stop_on_signals()
        with pytest.raises(Exception):
            runner.run([toy_loader], workflow)
        assert {s: signal.getsignal(s) for s in before} == before
    finally:
        signal.signal(signal.SIGINT, outer)
