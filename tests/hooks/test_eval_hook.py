"""EvalHook's mmcv 1.x behaviour: start, interval, by_epoch, save_best rules, resume, log lines."""

import json
import os
import os.path as osp

import pytest
from mmengine.config import Config

from conftest import ToyDataset
from mtrain.datasets import build_dataloader
from mtrain.hooks import EvalHook, Hook, IterTimerHook, OptimizerHook, TextLoggerHook
from mtrain.runner import build_runner
from mtrain.utils import ConfigError


class Scripted(ToyDataset):
    """The toy data, scored with scripted metrics: the next value per evaluation."""

    def __init__(self, values):
        super().__init__(n=16)
        self.values = list(values)

    def evaluate(self, results, logger=None, **kwargs):
        value = self.values.pop(0)
        return {'err_rate': value, 'accuracy': 1 - value}


class Seen(Hook):
    """(epoch, iter) at every evaluation."""

    def __init__(self):
        self.at = []

    def after_evaluation(self, runner):
        self.at.append((runner.epoch, runner.iter))


def _run(make_runner, hook, by_epoch=True, max_len=3, runner=None, extra=()):
    runner = runner or make_runner(by_epoch=by_epoch, max_len=max_len)
    seen = Seen()
    runner.register_hook(OptimizerHook())
    for h in extra:  # as the builder does: timer and loggers before the evaluation
        runner.register_hook(h)
    for h in (hook, seen):
        runner.register_hook(h, 'LOW')
    loader = build_dataloader(ToyDataset(n=16), 8, 0, shuffle=False)
    runner.run([loader], [('train', 1)])
    return runner, seen.at


def _val_loader(values=(0.5,) * 8):
    return build_dataloader(Scripted(values), 8, 0, shuffle=False)


@pytest.mark.parametrize('start, interval, expected', [
    (None, 1, [(0, 2), (1, 4), (2, 6)]),
    (0, 1, [(0, 0), (0, 2), (1, 4), (2, 6)]),  # start <= epoch 0: once before training too
    (1, 2, [(0, 2), (2, 6)]),                   # epochs 1 and 3
    (0, 2, [(1, 4)]),                            # mmcv: (epoch + 1 - start) % interval
])
def test_by_epoch_start_and_interval(make_runner, start, interval, expected):
    _, at = _run(make_runner, EvalHook(_val_loader(), start=start, interval=interval))
    assert at == expected


@pytest.mark.parametrize('start, interval, expected', [
    (None, 2, [2, 4, 6]), (1, 2, [1, 3, 5]), (0, 3, [3, 6])])
def test_by_iteration_start_and_interval(make_runner, start, interval, expected):
    hook = EvalHook(_val_loader(), start=start, interval=interval, by_epoch=False)
    _, at = _run(make_runner, hook, by_epoch=False, max_len=6)
    assert [i + 1 for _, i in at] == expected


def test_a_resumed_run_evaluates_before_training_when_start_has_passed(make_runner, tmp_path):
    first, _ = _run(make_runner, EvalHook(_val_loader()), max_len=2)
    runner = make_runner(max_len=3)
    runner.resume(_save(first, tmp_path))
    _, at = _run(make_runner, EvalHook(_val_loader(), start=1), runner=runner)
    assert at == [(2, 4), (2, 6)]  # before epoch 3 (as mmcv labels it: epoch 3), after it


def _save(runner, tmp_path):
    return runner.save_checkpoint(str(tmp_path), 'epoch_{}.pth')


def test_by_iteration_metrics_get_a_val_line_of_their_own(make_runner, tmp_path):
    hook = EvalHook(_val_loader(), interval=2, by_epoch=False)
    _run(make_runner, hook, by_epoch=False, max_len=4,
         extra=(IterTimerHook(), TextLoggerHook(interval=2, by_epoch=False)))
    [name] = [n for n in os.listdir(tmp_path) if n.endswith('.log.json')]
    with open(tmp_path / name) as f:
        lines = [line for line in map(json.loads, f) if 'mode' in line]
    assert [line['mode'] for line in lines] == ['train', 'val', 'train', 'val']
    assert 'accuracy' not in lines[0] and 'loss' in lines[0]
    assert lines[1]['iter'] == 2 and lines[1]['err_rate'] == 0.5  # iter: the val batches
    assert 'loss' not in lines[1]


@pytest.mark.parametrize('save_best, kwargs, scores, best_epoch', [
    ('accuracy', {}, [0.5, 0.2, 0.4], 2),                     # 'acc' in it: greater
    ('err_rate', {'rule': 'less'}, [0.5, 0.2, 0.4], 2),
    ('err_rate', {'less_keys': ['err']}, [0.5, 0.2, 0.4], 2),
    ('err_rate', {'greater_keys': 'err'}, [0.5, 0.2, 0.4], 1),
    ('auto', {'rule': 'less'}, [0.3, 0.6, 0.1], 3),            # auto: the first key, err_rate
])
def test_save_best_keeps_one_file_by_the_rule(make_runner, tmp_path, save_best, kwargs, scores,
                                              best_epoch):
    hook = EvalHook(_val_loader(scores), save_best=save_best, **kwargs)
    runner, _ = _run(make_runner, hook)
    key = 'err_rate' if save_best == 'auto' else save_best
    best = [n for n in os.listdir(tmp_path) if n.startswith('best_')]
    assert best == [f'best_{key}_epoch_{best_epoch}.pth']
    msgs = runner.meta['hook_msgs']
    assert msgs['best_ckpt'] == str(tmp_path / best[0])
    value = scores[best_epoch - 1]
    assert msgs['best_score'] == pytest.approx(1 - value if key == 'accuracy' else value)


def test_rule_inference_follows_mmcv(toy_dataset):
    loader = build_dataloader(toy_dataset, 8, 0, shuffle=False)
    rules = {key: EvalHook(loader, save_best=key).rule
             for key in ('accuracy', 'top_loss', 'val_loss', 'bbox_mAP', 'AR@100', 'mIoU')}
    assert rules == {'accuracy': 'greater', 'top_loss': 'greater', 'val_loss': 'less',
                     'bbox_mAP': 'greater', 'AR@100': 'greater', 'mIoU': 'greater'}
    with pytest.raises(ConfigError, match="evaluation.rule.*greater or a smaller 'err_rate'"):
        EvalHook(loader, save_best='err_rate')


def test_best_checkpoint_is_restored_on_resume_and_the_stale_file_removed(make_runner, tmp_path):
    # first run: the best accuracy (0.9) at epoch 2; it ends after epoch 3
    first, _ = _run(make_runner, EvalHook(_val_loader([0.5, 0.1, 0.4]), save_best='accuracy'))
    last = _save(first, tmp_path)  # mmcv's name: epoch_4.pth (runner.epoch + 1), 3 epochs done
    assert osp.isfile(tmp_path / 'best_accuracy_epoch_2.pth')
    runner = make_runner(max_len=5)
    hook = EvalHook(_val_loader([0.2, 0.05]), save_best='accuracy')
    runner.register_hook(hook, 'LOW')
    runner.resume(last)
    assert hook.best_score == pytest.approx(0.9)  # restored before the run goes on
    assert hook.best_ckpt_path == str(tmp_path / 'best_accuracy_epoch_2.pth')
    # epoch 4 (0.8) is no better; epoch 5 (0.95) is, and replaces the old file
    runner.register_hook(OptimizerHook())
    runner.run([build_dataloader(ToyDataset(n=16), 8, 0, shuffle=False)], [('train', 1)])
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith('best_')) == [
        'best_accuracy_epoch_5.pth']
    assert runner.meta['hook_msgs']['best_score'] == pytest.approx(0.95)
    assert runner.meta['hook_msgs']['best_ckpt'] == str(tmp_path / 'best_accuracy_epoch_5.pth')


def test_out_dir_is_joined_with_the_work_dir_name(make_runner, tmp_path):
    out = tmp_path / 'elsewhere'
    _run(make_runner, EvalHook(_val_loader([0.5, 0.1, 0.4]), save_best='accuracy',
                               out_dir=str(out)))
    assert os.listdir(out / tmp_path.name) == ['best_accuracy_epoch_2.pth']


def test_test_fn_replaces_the_inference(make_runner):
    calls = []

    def test_fn(model, loader):
        calls.append(model.training)
        return ['anything']

    _run(make_runner, EvalHook(_val_loader(), test_fn=test_fn), max_len=2)
    assert calls == [False, False]


# -- config mistakes stop the run before training (issue 17, trap 5) ------------
def _digits_cfg(**evaluation):
    cfg = Config.fromfile(osp.join(osp.dirname(__file__), '..', '..', 'configs', 'digits',
                                   'lenet_digits.py'))
    cfg.evaluation = dict(interval=1, **evaluation)
    cfg.device = 'cpu'
    return cfg


@pytest.mark.parametrize('evaluation, key, hint', [
    (dict(metric='acuracy'), 'evaluation.metric', "Did you mean 'accuracy'"),
    (dict(metric='accuracy', save_best='acc'), 'evaluation.save_best', "Did you mean 'accuracy'"),
    (dict(metric='accuracy', save_best='top1'), 'evaluation.save_best', "Known: 'accuracy'"),
])
def test_metric_and_save_best_typos_fail_when_built(tmp_path, logger, evaluation, key, hint):
    with pytest.raises(ConfigError, match=key) as error:
        build_runner(_digits_cfg(**evaluation), str(tmp_path), logger)
    assert hint in str(error.value) and "or 'accuracy'" not in str(error.value)


def test_known_names_pass_the_check(tmp_path, logger):
    runner, _, _ = build_runner(_digits_cfg(metric=['accuracy_top3', 'per_class'],
                                            save_best='precision_7'), str(tmp_path), logger)
    assert any(isinstance(h, EvalHook) for h in runner.hooks)


def test_a_dataset_without_evaluate_fails_when_built():
    class NoEvaluate(ToyDataset):
        evaluate = None

    with pytest.raises(ConfigError, match=r'key `evaluation`.*NoEvaluate has no evaluate'):
        EvalHook(build_dataloader(NoEvaluate(), 8, 0, shuffle=False))


def test_a_save_best_that_is_not_a_name_is_mmcvs_assertion_and_a_config_error(toy_dataset):
    """mmcv 1.7.2 asserts ``isinstance(save_best, str)``; 1.x code (and mmcv's tests) catch that."""
    loader = build_dataloader(toy_dataset, samples_per_gpu=2, workers_per_gpu=0)
    with pytest.raises(AssertionError, match='evaluation.save_best'):
        EvalHook(loader, save_best=True)
    with pytest.raises(ConfigError):
        EvalHook(loader, save_best=True)


def test_a_subclass_overriding_the_default_keys_changes_the_inferred_rule(toy_dataset):
    """mmcv's ``_default_greater_keys``/``_default_less_keys`` are override points."""
    class ErrorIsLess(EvalHook):
        _default_less_keys = ['loss', 'err']

    loader = build_dataloader(toy_dataset, samples_per_gpu=2, workers_per_gpu=0)
    assert ErrorIsLess(loader, save_best='err_rate').rule == 'less'
    with pytest.raises(ConfigError, match='evaluation.rule'):
        EvalHook(loader, save_best='err_rate')
