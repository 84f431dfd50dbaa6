"""ProgressBarHook: a tqdm bar on a terminal, plain periodic lines elsewhere."""

import io
import logging
import re
import sys

from mtrain.hooks import Hook, IterTimerHook, OptimizerHook, ProgressBarHook, TextLoggerHook


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


class HandlerRecorder(Hook):
    """Which handlers the runner's logger has in the middle of the run."""

    def __init__(self):
        self.seen = []

    def after_train_iter(self, runner):
        self.seen = [type(h).__name__ for h in runner.logger.handlers]


def _train(runner, loader, hook):
    runner.register_hook(OptimizerHook())
    runner.register_hook(IterTimerHook(), 'LOW')
    runner.register_hook(TextLoggerHook(interval=4), 'VERY_LOW')
    runner.register_hook(hook, 'VERY_LOW')
    runner.run([loader], [('train', 1)])


def test_plain_lines_every_interval_when_not_a_terminal(make_runner, toy_loader):
    stream = io.StringIO()
    _train(make_runner(max_len=2), toy_loader, ProgressBarHook(stream=stream, interval=4))
    lines = stream.getvalue().splitlines()
    assert [re.match(r'progress: (\d+)/16 iters', l).group(1) for l in lines] == \
        ['4', '8', '12', '16']
    assert '(25.0%)' in lines[0] and '(100.0%)' in lines[-1] and 'eta 0:00:00' in lines[-1]
    assert all(' it/s, elapsed ' in l for l in lines)
    # The loss logged at that interval is on the same line (4 decimals).
    assert re.search(r', loss: \d+\.\d{4}$', lines[0])


def test_bar_with_eta_on_a_terminal_and_log_lines_above_it(make_runner, toy_loader, logger,
                                                           capsys):
    console = logging.StreamHandler(sys.stderr)  # the bar and the console log share stderr
    logger.addHandler(console)
    recorder = HandlerRecorder()
    runner = make_runner(max_len=2)
    runner.register_hook(recorder)
    try:
        _train(runner, toy_loader, ProgressBarHook(tty=True, interval=4))
    finally:
        logger.removeHandler(console)
    assert recorder.seen == ['_TqdmLoggingHandler']  # console lines went through tqdm.write
    text = capsys.readouterr().err
    final = text.split('\r')[-1]
    assert re.search(r'Epoch 2/2: 100%.*16/16 \[\d\d:\d\d<00:00', final)  # elapsed<eta
    assert re.search(r'loss=\d', final)
    # A log line written while the bar is up clears it, and the bar is drawn again below.
    before, after = text.split('Epoch [2][4/8]', 1)
    assert before.endswith('\r') and after.split('\n', 1)[1].startswith('\rEpoch 2/2:')


def test_handlers_are_restored_after_the_run(make_runner, toy_loader, logger):
    before = list(logger.handlers)
    hook = ProgressBarHook(stream=FakeTerminal(), interval=4)
    _train(make_runner(max_len=1), toy_loader, hook)
    assert logger.handlers == before and hook.bar is None
