"""TensorboardLoggerHook: real event files, read back with TensorBoard's own reader."""

import json
import os

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from mtrain.datasets import build_dataloader
from mtrain.hooks import (EvalHook, IterTimerHook, OptimizerHook, TensorboardLoggerHook,
                          TextLoggerHook)


def _scalars(log_dir):
    acc = EventAccumulator(log_dir)
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()['scalars']}


def test_event_file_holds_the_logged_losses_lr_momentum_grad_norm_and_metrics(
        make_runner, toy_loader, toy_dataset, tmp_path):
    runner = make_runner(max_len=2, lr=0.1, momentum=0.9)
    runner.register_hook(OptimizerHook(grad_clip=dict(max_norm=1.0)))
    runner.register_hook(IterTimerHook(), 'LOW')
    runner.register_hook(EvalHook(build_dataloader(toy_dataset, 16, 0, shuffle=False)), 'LOW')
    runner.register_hook(TextLoggerHook(interval=4), 'VERY_LOW')
    runner.register_hook(TensorboardLoggerHook(interval=4), 'VERY_LOW')
    runner.run([toy_loader], [('train', 1)])

    scalars = _scalars(str(tmp_path / 'tf_logs'))
    assert {'train/loss', 'train/loss_cls', 'train/acc', 'train/grad_norm', 'learning_rate',
            'momentum', 'val/accuracy'} <= set(scalars)
    assert 'train/time' not in scalars and 'train/data_time' not in scalars  # as mmcv 1.x
    [log] = [n for n in os.listdir(tmp_path) if n.endswith('.log.json')]
    lines = [r for r in map(json.loads, (tmp_path / log).read_text().splitlines()) if 'mode' in r]
    train = [line for line in lines if line['mode'] == 'train']
    # The same values as the text log, at the global iteration.
    assert [step for step, _ in scalars['train/loss']] == [4, 8, 12, 16]
    assert [v for _, v in scalars['train/loss']] == pytest.approx(
        [line['loss'] for line in train], abs=1e-5)
    assert [v for _, v in scalars['learning_rate']][0] == pytest.approx(0.1)
    assert {round(v, 6) for _, v in scalars['momentum']} == {0.9}  # every line, train and val
    val = [line['accuracy'] for line in lines if line['mode'] == 'val']
    assert [step for step, _ in scalars['val/accuracy']] == [8, 16]
    assert [v for _, v in scalars['val/accuracy']] == pytest.approx(val, abs=1e-5)


def test_log_dir_option_and_rank_zero_writer_closed_after_run(make_runner, toy_loader, tmp_path):
    log_dir = tmp_path / 'elsewhere'
    runner = make_runner(max_len=1)
    runner.register_hook(OptimizerHook())
    runner.register_hook(IterTimerHook(), 'LOW')  # mmcv: a line without 'time' is a val line
    hook = TensorboardLoggerHook(log_dir=str(log_dir), interval=2, by_epoch=False)
    runner.register_hook(hook, 'VERY_LOW')
    runner.run([toy_loader], [('train', 1)])
    assert hook.writer is None  # closed (and flushed) in after_run
    assert [s for s, _ in _scalars(str(log_dir))['train/loss']] == [2, 4, 6, 8]
