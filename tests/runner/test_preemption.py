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
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    runner = make_runner(max_len=1)
    runner.register_hook(OptimizerHook())
    runner.stop_on_signals()
    runner.run([toy_loader], [('train', 1)])
    assert {s: signal.getsignal(s) for s in before} == before
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C works again after the run
        os.kill(os.getpid(), signal.SIGINT)
