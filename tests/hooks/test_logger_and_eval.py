"""TextLoggerHook's mmcv-format log.json, IterTimerHook, EvalHook and save_best."""

import json
import os

import pytest

from mtrain.datasets import build_dataloader
from mtrain.hooks import EvalHook, IterTimerHook, OptimizerHook, TextLoggerHook


def _json_lines(work_dir):
    [name] = [n for n in os.listdir(work_dir) if n.endswith('.log.json')]
    with open(os.path.join(work_dir, name)) as f:
        return [json.loads(line) for line in f]


def test_text_logger_writes_mmcv_format_json(make_runner, toy_loader, toy_dataset, tmp_path):
    runner = make_runner(max_len=2)
    runner.meta = {'seed': 0, 'exp_name': 'toy'}
    val_loader = build_dataloader(toy_dataset, 16, 0, shuffle=False)
    runner.register_hook(OptimizerHook())
    runner.register_hook(IterTimerHook(), 'LOW')
    runner.register_hook(EvalHook(val_loader, metric='accuracy'), 'LOW')
    runner.register_hook(TextLoggerHook(interval=4), 'VERY_LOW')
    runner.run([toy_loader], [('train', 1)])
    lines = _json_lines(tmp_path)
    assert lines[0] == {'seed': 0, 'exp_name': 'toy'}
    train = [l for l in lines if l.get('mode') == 'train']
    val = [l for l in lines if l.get('mode') == 'val']
    assert [(l['epoch'], l['iter']) for l in train] == [(1, 4), (1, 8), (2, 4), (2, 8)]
    assert set(train[0]) >= {'mode', 'epoch', 'iter', 'lr', 'time', 'data_time', 'loss',
                             'loss_cls', 'acc'}
    assert train[0]['lr'] == 0.1
    assert [l['epoch'] for l in val] == [1, 2] and 0 <= val[0]['accuracy'] <= 1


def test_logged_loss_is_the_mean_over_the_interval(make_runner, toy_loader, tmp_path):
    runner = make_runner(max_len=1, lr=0.0)  # lr 0: the losses are those of the initial model
    runner.register_hook(OptimizerHook())
    runner.register_hook(IterTimerHook())  # a line without 'time' counts as val (mmcv)
    runner.register_hook(TextLoggerHook(interval=8), 'VERY_LOW')
    model = runner.model_wrapper.module
    runner.run([toy_loader], [('train', 1)])
    model.train()
    losses = [model(**b)['loss_cls'].item() for b in toy_loader]
    [line] = [l for l in _json_lines(tmp_path) if l.get('mode') == 'train']
    assert line['loss'] == pytest.approx(sum(losses) / 8, abs=1e-5)


def test_eval_hook_scores_every_sample_and_keeps_one_best_checkpoint(make_runner, toy_loader,
                                                                     toy_dataset, tmp_path):
    val_loader = build_dataloader(toy_dataset, 5, 0, shuffle=False)  # 64 = 12*5 + 4
    runner = make_runner(max_len=3, lr=0.5)
    runner.register_hook(OptimizerHook())
    hook = EvalHook(val_loader, metric=['accuracy', 'per_class'], save_best='accuracy')
    runner.register_hook(hook, 'LOW')
    runner.run([toy_loader], [('train', 1)])
    predictions = hook.test(runner)
    assert predictions.shape == (64, 3) and predictions.device.type == 'cpu'
    expected = (predictions.argmax(1) == toy_dataset.y).float().mean().item()
    assert hook.evaluate(runner, predictions) == pytest.approx(expected)
    assert runner.eval_results['accuracy'] == pytest.approx(expected)
    best = [n for n in os.listdir(tmp_path) if n.startswith('best_')]
    assert len(best) == 1 and best[0].startswith('best_accuracy_epoch_')
    assert hook.state_dict()['best_score'] == max(hook.best_score, expected)


def test_eval_interval_and_start(toy_dataset):
    loader = build_dataloader(toy_dataset, 16, 0, shuffle=False)

    def due(hook, n):
        return [e for e in range(1, n) if hook._should_evaluate(_At(e - 1))]

    assert due(EvalHook(loader, interval=2, start=3), 10) == [3, 5, 7, 9]
    assert due(EvalHook(loader, interval=2), 7) == [2, 4, 6]
    with pytest.raises(ValueError, match='rule'):
        EvalHook(loader, rule='bigger')


class _At:
    """Just the counters ``_should_evaluate`` reads."""

    def __init__(self, n):
        self.epoch = self.iter = n


def test_numpy_scalar_metrics_reach_the_trackers_as_numbers():
    """mmcv's ``is_scalar`` takes numpy numbers; a tracker gets them as Python numbers."""
    import numpy as np
    from mtrain.hooks.logger.base import _loggable
    assert _loggable(np.float32(0.5)) and _loggable(np.int64(3)) and _loggable(0.5)
    assert not _loggable(np.bool_(True)) and not _loggable(True) and not _loggable([1, 2])
