"""mmcv 1.7.2's LogBuffer history API and print_log logger names (issue 21), and two
details of mmcv's runs (issue 26): ``runner.epoch`` at a new pass under IterBasedRunner,
numpy scalars in ``*.log.json``.

The expected numbers are worked out from what mmcv 1.7.2's code does
(mmcv/runner/log_buffer.py, mmcv/utils/logging.py, mmcv/runner/iter_based_runner.py,
mmcv/runner/hooks/logger/text.py with mmcv's json handler).
"""

import json
import logging
import os
import os.path as osp

import numpy as np
import pytest
import torch

from mtrain.hooks import Hook, OptimizerHook, TextLoggerHook
from mtrain.runner import LogBuffer
from mtrain.utils import get_logger, print_log


# -- LogBuffer: mmcv's history ---------------------------------------------------------
def _filled():
    buf = LogBuffer()
    for value, count in ((1.0, 2), (2.0, 1), (4.0, 1)):
        buf.update({'loss': torch.tensor(value), 'acc': value / 10}, count)
    return buf


def test_val_and_n_history_hold_every_value_since_clear():
    buf = _filled()
    assert list(buf.val_history) == ['loss', 'acc']
    assert buf.val_history['loss'] == [1.0, 2.0, 4.0]
    assert buf.n_history['loss'] == [2, 1, 1]
    buf.average()
    buf.update({'loss': torch.tensor(8.0)}, 1)
    assert buf.val_history['loss'] == [1.0, 2.0, 4.0, 8.0]  # averaging keeps the history
    assert buf.n_history['acc'] == [2, 1, 1]
    buf.clear()
    assert buf.val_history == {} and buf.n_history == {} and buf.output == {}


def test_average_n_is_the_weighted_mean_of_the_latest_n():
    buf = _filled()
    buf.average(2)
    assert buf.ready and buf.output['loss'] == (2.0 + 4.0) / 2
    buf.average()  # n=0: every value since clear
    assert buf.output['loss'] == (1.0 * 2 + 2.0 + 4.0) / 4
    assert buf.output['acc'] == pytest.approx((0.1 * 2 + 0.2 + 0.4) / 4)
    buf.update({'loss': torch.tensor(10.0)}, 1)
    buf.average(3)  # spans values averaged before and new ones
    assert buf.output['loss'] == (2.0 + 4.0 + 10.0) / 3
    with pytest.raises(AssertionError):
        buf.average(-1)


def test_output_after_average_and_clear_output():
    buf = _filled()
    buf.average(1)
    buf.output['accuracy'] = 0.5  # what an evaluation hook adds
    assert buf.output == {'loss': 4.0, 'acc': 0.4, 'accuracy': 0.5} and buf.ready
    buf.clear_output()
    assert buf.output == {} and not buf.ready
    assert buf.val_history['loss'] == [1.0, 2.0, 4.0]  # clear_output keeps the history


def test_interval_average_of_the_loggers_feeds_the_history():
    buf = _filled()
    buf.average_interval()
    assert buf.output['loss'] == 2.0 and buf.pending('loss') == []
    buf.update({'loss': torch.tensor(3.0)}, 1)
    buf.average_interval()
    assert buf.output['loss'] == 3.0  # the loggers' line: since the last one
    assert buf.val_history['loss'] == [1.0, 2.0, 4.0, 3.0]


def test_history_stays_bounded():
    buf = LogBuffer()
    buf.max_pending = 8
    for i in range(20):
        buf.update({'loss': float(i)})
        buf.average_interval()
    assert buf.val_history['loss'] == [float(i) for i in range(12, 20)]


def test_a_1x_hook_reads_the_history_in_a_real_run(make_runner, toy_loader):
    class LastLoss(Hook):  # as 1.x hooks do: the latest loss, and a window's mean
        def __init__(self):
            self.rows = []

        def after_train_iter(self, runner):
            buf = runner.log_buffer
            self.rows.append((buf.val_history['loss'][-1], len(buf.n_history['loss'])))

    runner = make_runner(max_len=1)
    runner.register_hook(OptimizerHook())
    runner.register_logger_hooks(dict(interval=3, hooks=[dict(type='TextLoggerHook')]))
    hook = LastLoss()
    runner.register_hook(hook, 'LOWEST')
    losses = []
    runner.register_hook(type('L', (Hook,), {'after_train_iter': lambda self, r: losses.append(
        float(r.outputs['loss'].detach()))})(), 'HIGHEST')
    runner.run([toy_loader], [('train', 1)])
    assert [loss for loss, _ in hook.rows] == pytest.approx(losses, abs=1e-6)
    assert [n for _, n in hook.rows] == list(range(1, 9))  # all since the epoch began


# -- print_log ---------------------------------------------------------------------------
def test_print_log_none_prints_and_silent_says_nothing(capsys):
    print_log('hello')
    print_log('quiet', logger='silent')
    out = capsys.readouterr()
    assert out.out == 'hello\n' and 'quiet' not in out.err


def test_print_log_takes_a_logger_or_a_logger_name(capsys):
    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append((record.name, record.levelno, record.getMessage()))

    logger = logging.getLogger('mtrain.test.print_log')
    logger.addHandler(Keep())
    logger.setLevel(logging.DEBUG)
    print_log('a', logger=logger, level=logging.WARNING)
    assert seen == [('mtrain.test.print_log', logging.WARNING, 'a')]
    print_log('init info', logger='mmcv_like_package')  # BaseModule.init_weights passes a name
    assert 'init info' in capsys.readouterr().err
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        print_log('to the root', logger='root', level=logging.WARNING)
        assert 'to the root' in capsys.readouterr().err
    finally:
        for h in root.handlers[:]:
            if h not in handlers:
                root.removeHandler(h)
        root.setLevel(level)


def test_print_log_keeps_a_configured_logger_as_it_is(capsys):
    named = get_logger('mtrain')  # configured, as by a run
    level = named.level
    named.setLevel(logging.WARNING)
    try:
        print_log('hidden', logger='mtrain')  # INFO under a WARNING logger: not shown
        assert 'hidden' not in capsys.readouterr().err
        assert named.level == logging.WARNING
    finally:
        named.setLevel(level)


def test_print_log_rejects_other_types():
    with pytest.raises(TypeError, match='logger should be'):
        print_log('x', logger=3)


# -- mmcv details of a run -----------------------------------------------------------------
def test_iter_runner_epoch_at_a_new_pass_is_read_before_the_batch_as_mmcv(make_runner,
                                                                         toy_loader):
    # mmcv 1.7.2 IterBasedRunner.train: ``self._epoch = data_loader.epoch`` before
    # ``next(data_loader)``, so iteration 8 (the first of pass 1, 8 batches a pass) still
    # reads epoch 0.
    epochs = []
    runner = make_runner(by_epoch=False, max_len=18)
    runner.register_hook(OptimizerHook())
    runner.register_hook(type('E', (Hook,), {'before_train_iter': lambda self, r: epochs.append(
        r.epoch)})())
    runner.run([toy_loader], [('train', 1)])
    assert epochs == [0] + [(i - 1) // 8 for i in range(1, 18)]
    assert epochs[8] == 0 and epochs[9] == 1


class _NumpyMetrics(Hook):
    """An evaluation hook of the 1.x era: numpy scalars into the log buffer."""

    priority = 'LOW'

    def after_train_epoch(self, runner):
        runner.log_buffer.output.update(acc=np.float32(3.8142376), top=np.float64(0.123456789),
                                        count=np.int64(7), per_class=np.array([0.5, 0.25]))
        runner.log_buffer.ready = True


def test_numpy_scalars_land_in_log_json_as_numbers_as_mmcv_writes_them(make_runner, toy_loader,
                                                                         tmp_path):
    runner = make_runner(max_len=1)
    runner.register_hook(OptimizerHook())
    runner.register_hook(_NumpyMetrics())
    runner.register_hook(TextLoggerHook(interval=100))
    runner.run([toy_loader], [('train', 1)])
    name = next(n for n in os.listdir(tmp_path) if n.endswith('.log.json'))
    with open(osp.join(tmp_path, name)) as f:
        lines = [json.loads(line) for line in f]
    line = next(line for line in lines if 'top' in line)
    # mmcv: a float64 (a float) is rounded to 5 digits, a float32 is not and becomes a Python
    # float, an int64 an int, an array a list.
    assert line['acc'] == float(np.float32(3.8142376)) and isinstance(line['acc'], float)
    assert line['top'] == 0.12346
    assert line['count'] == 7 and isinstance(line['count'], int)
    assert line['per_class'] == [0.5, 0.25]
