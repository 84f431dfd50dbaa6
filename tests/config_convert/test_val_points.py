"""Which epochs/iterations get validated: mtrain (mmcv 1.7.2's EvalHook) vs mmengine 0.10.7's Runner.

Each case trains both sides on the toy network (2 iterations an epoch) and
records where validation ran: mtrain through the val dataset's ``evaluate``,
mmengine through ``after_val_epoch``. An exact verdict must give equal lists,
a lossy one the two lists its reason names.
"""

import copy
import itertools
import json
import logging
import os
import subprocess

import pytest
import mmcv_python  # tests/mmcv_python.py
from convert_harness import CvToyData, EngineToyNet, _one_thread
from mmengine.config import Config
from mmengine.dataset import InfiniteSampler
from mmengine.evaluator import BaseMetric, Evaluator
from mmengine.hooks import Hook as EngineHook
from mmengine.runner import Runner
from torch.utils.data import DataLoader

from mtrain.config import check_config
from mtrain.config_convert import for_training, to_mmcv, to_mmengine
from mtrain.config_convert.val_points import (describe, mmcv_points, mmengine_points,
                                              to_mmcv_rule, to_mmengine_rule)
from mtrain.hooks import Hook
from mtrain.registry import DATASETS
from mtrain.runner import build_runner

_AT = {}  # where mtrain's training is when its EvalHook (priority LOW) runs
_RUNS = itertools.count()


@DATASETS.register_module(force=True)
class ValPointData(CvToyData):
    """8 val samples whose ``evaluate`` records the epoch/iteration it is called at."""

    calls: list = []

    def __init__(self) -> None:
        super().__init__(n=8)

    def evaluate(self, results, metric='accuracy', logger=None):
        ValPointData.calls.append(_AT['now'])
        return {'accuracy': 0.5}


class Where(Hook):
    """Runs before EvalHook: 0 before training, then the 1-based epoch/iteration just done."""

    def before_train_epoch(self, runner) -> None:
        _AT['now'] = runner.epoch

    def before_train_iter(self, runner) -> None:
        _AT['now'] = runner.epoch if _AT['by_epoch'] else runner.iter

    def after_train_iter(self, runner) -> None:
        _AT['now'] = runner.iter + 1

    def after_train_epoch(self, runner) -> None:
        _AT['now'] = runner.epoch + 1


def mtrain_points(cfg, by_epoch, tmp_path):
    """Train ``cfg`` (mmcv schema) in mtrain; the points its evaluation ran at."""
    cfg = Config(dict(cfg, model=dict(type='CvToyNet'), log_config=None, checkpoint_config=None,
                      nan_policy=None, device='cpu'))
    check_config(cfg)
    runner, loaders, workflow = build_runner(cfg, str(tmp_path / f'm{next(_RUNS)}'),
                                             logging.getLogger('t'), seed=0)
    runner.register_hook(Where(), 'VERY_HIGH')
    ValPointData.calls, _AT['by_epoch'] = [], by_epoch
    with _one_thread():
        runner.run(loaders, workflow)
    return ValPointData.calls


def mmcv_cfg(length, epochs, **evaluation):
    runner = (dict(type='EpochBasedRunner', max_epochs=length) if epochs else
              dict(type='IterBasedRunner', max_iters=length))
    return dict(optimizer=dict(type='SGD', lr=0.01), optimizer_config=dict(), runner=runner,
                lr_config=dict(policy='fixed'), evaluation=dict(metric='accuracy', **evaluation),
                data=dict(samples_per_gpu=8, workers_per_gpu=0, shuffle=False,
                          train=dict(type='CvToyData', n=16), val=dict(type='ValPointData')))


class _ValNet(EngineToyNet):
    def forward(self, img, gt_label=None, mode='loss'):
        if mode == 'loss':
            return super().forward(img, gt_label)
        return list(self.net(img))


class _Count(BaseMetric):
    default_prefix = 'count'

    def process(self, data_batch, data_samples) -> None:
        self.results.append(1)

    def compute_metrics(self, results):
        return {'n': len(results)}


class _EngineWhere(EngineHook):
    def __init__(self, by_epoch) -> None:
        self.by_epoch, self.points = by_epoch, []

    def after_val_epoch(self, runner, metrics=None) -> None:
        self.points.append(runner.epoch if self.by_epoch else runner.iter)


def engine_points(train_cfg, tmp_path):
    """mmengine 0.10.7's Runner on ``train_cfg``; the points its ValLoop ran at."""
    by_epoch = train_cfg.get('type', 'EpochBasedTrainLoop') == 'EpochBasedTrainLoop' and \
        train_cfg.get('by_epoch', True)
    data = CvToyData(n=16)
    where = _EngineWhere(by_epoch)
    runner = Runner(
        model=_ValNet(), work_dir=str(tmp_path / f'e{next(_RUNS)}'),
        experiment_name=f'valpoints{next(_RUNS)}',
        train_dataloader=DataLoader(data, batch_size=8, sampler=None if by_epoch else
                                    InfiniteSampler(data, shuffle=False)),
        val_dataloader=DataLoader(CvToyData(n=8), batch_size=8), val_cfg=dict(type='ValLoop'),
        val_evaluator=Evaluator([_Count()]), optim_wrapper=dict(optimizer=dict(type='SGD',
                                                                               lr=0.01)),
        train_cfg=copy.deepcopy(train_cfg), default_hooks=dict(checkpoint=None, logger=None),
        custom_hooks=[where], default_scope='mmengine', log_level='WARNING')
    with _one_thread():
        runner.train()
    return where.points


def _verdict(report, key):
    return {e.source: e for e in report.entries}[key]


def _assert_verdict(entry, exact, source, target, by_epoch):
    """Exact: the measured lists equal; lossy: they differ and the reason names both."""
    (source_says, source_points), (target_name, target_points) = source, target
    if exact:
        assert entry.kind == 'exact' and target_points == source_points, entry
        return
    unit = 'epoch' if by_epoch else 'iteration'
    assert entry.kind == 'lossy' and target_points != source_points, entry
    assert f'{source_says} after {describe(source_points, unit)}, {target_name} would after ' \
        f'{describe(target_points, unit)}' in entry.reason


# (start, interval, length, by_epoch): mmcv's points, and whether mmengine can give them.
MMCV_CASES = [
    (None, 2, 4, True),   # [2, 4]: val_interval=2
    (3, 2, 5, True),      # [3, 5]: val_begin=3, val_interval=3
    (5, 1, 3, True),      # []: val_begin=4, past the end
    (None, 2, 3, True),   # [2]: mmengine adds the last epoch 3
    (0, 1, 2, True),      # [0, 1, 2]: mmcv evaluates before training
    (2, 2, 6, False),     # iterations [2, 4, 6]: val_interval=2
    (1, 2, 6, False),     # iterations [1, 3, 5]: lossy
]


@pytest.mark.parametrize('start,interval,length,by_epoch', MMCV_CASES)
def test_mmcv_evaluation_converted_validates_where_mmcv_did(start, interval, length, by_epoch,
                                                            tmp_path):
    cfg = mmcv_cfg(length, by_epoch, start=start, interval=interval)
    converted, report = to_mmengine(cfg)
    got_mmcv = mtrain_points(cfg, by_epoch, tmp_path)
    got_engine = engine_points(converted['train_cfg'], tmp_path)
    assert got_mmcv == mmcv_points(start, interval, length)
    entry = _verdict(report, 'evaluation.interval' if start is None else 'evaluation.start')
    exact = to_mmengine_rule(start, interval, length) is not None
    _assert_verdict(entry, exact, ('mmcv evaluates', got_mmcv), ('mmengine', got_engine),
                    by_epoch)


# (val_begin, val_interval, length, by_epoch)
ENGINE_CASES = [
    (2, 1, 3, True),      # [2, 3]: start=2
    (1, 2, 3, True),      # [2, 3]: start=2, interval=1
    (1, 2, 5, True),      # [2, 4, 5]: no mmcv rule
    (1, 4, 6, False),     # iterations [4, 6]: start=4, interval=2
    (1, 4, 9, False),     # iterations [4, 8, 9]: no mmcv rule
]


@pytest.mark.parametrize('begin,interval,length,by_epoch', ENGINE_CASES)
def test_mmengine_config_validates_where_mmengine_does(begin, interval, length, by_epoch,
                                                       tmp_path):
    length_key = 'max_epochs' if by_epoch else 'max_iters'
    train_cfg = dict(by_epoch=by_epoch, val_begin=begin, val_interval=interval,
                     **{length_key: length})
    loader = dict(batch_size=8, num_workers=0, sampler=dict(type='DefaultSampler',
                                                            shuffle=False))
    cfg = dict(optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.01)), train_cfg=train_cfg,
               train_dataloader=dict(loader, dataset=dict(type='CvToyData', n=16)),
               val_dataloader=dict(loader, dataset=dict(type='ValPointData')),
               val_cfg=dict(type='ValLoop'), val_evaluator=dict(type='Accuracy'))
    expected = engine_points(train_cfg, tmp_path)
    assert expected == mmengine_points(begin, interval, length)
    # mtrain trains the mmengine config itself at mmengine's points, exact or not in mmcv terms
    assert mtrain_points(for_training(cfg), by_epoch, tmp_path) == expected
    converted, report = to_mmcv(cfg)
    got = mtrain_points(converted, by_epoch, tmp_path)
    entry = _verdict(report, 'train_cfg.val_interval' if begin == 1 else 'train_cfg.val_begin')
    exact = to_mmcv_rule(begin, interval, length) is not None
    _assert_verdict(entry, exact, ('mmengine validates', expected), ('mmcv', got), by_epoch)


def _brute(points, candidates, rule):
    return [c for c in candidates if rule(*c) == points]


def test_the_closed_forms_find_a_rule_exactly_when_one_exists():
    """Every (start, interval) and (val_begin, val_interval) up to 9 epochs, by search."""
    for n in range(1, 10):
        engine = [(b, k) for b in range(1, n + 2) for k in range(1, n + 2)]
        mmcv = [(s, k) for s in [None, *range(0, n + 2)] for k in range(1, n + 2)]
        for start, interval in mmcv + [(None, n + 3), (n + 3, 1)]:
            want = mmcv_points(start, interval, n)
            rule = to_mmengine_rule(start, interval, n)
            found = _brute(want, engine, lambda b, k: mmengine_points(b, k, n))
            assert (rule is not None) == bool(found), (start, interval, n, found)
            assert rule is None or mmengine_points(*rule, n) == want
        for begin, interval in engine:
            want = mmengine_points(begin, interval, n)
            rule = to_mmcv_rule(begin, interval, n)
            found = _brute(want, mmcv, lambda s, k: mmcv_points(s, k, n))
            assert (rule is not None) == bool(found), (begin, interval, n, found)
            assert rule is None or mmcv_points(*rule, n) == want


def _mmcv_python():
    return mmcv_python.find('import mmcv; print(mmcv.__version__)', ['1.7.2'],
                            'mmcv 1.7.2 (MMCV_WITH_OPS=0)')


@pytest.mark.slow
def test_mmcv_points_are_where_mmcv_1_7_2s_eval_hook_evaluates():
    """Real mmcv 1.7.2 EvalHook, every start and interval up to 6 epochs / 6 iterations."""
    script = os.path.join(os.path.dirname(__file__), 'mmcv_val_points.py')
    result = subprocess.run([_mmcv_python(), script, '6'], capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=''))
    assert result.returncode == 0, result.stderr[-3000:]
    rows = json.loads(result.stdout)
    assert len(rows) == 2 * sum((n + 3) * (n + 1) for n in range(1, 7))
    for by_epoch, start, interval, length, points in rows:
        assert points == mmcv_points(start, interval, length), (by_epoch, start, interval)


@pytest.mark.slow
def test_mmengine_points_are_where_mmengine_0_10_7s_runner_validates(tmp_path):
    """mmengine's Runner, every val_begin and val_interval up to 5 epochs / 5 iterations."""
    for by_epoch, n in itertools.product((True, False), range(1, 6)):
        for begin, interval in itertools.product(range(1, n + 2), range(1, n + 2)):
            train_cfg = dict(by_epoch=by_epoch, val_begin=begin, val_interval=interval,
                             **{'max_epochs' if by_epoch else 'max_iters': n})
            assert engine_points(train_cfg, tmp_path) == mmengine_points(begin, interval, n), \
                train_cfg


def test_evaluation_by_iteration_in_an_epoch_runner_is_lossy_as_measured(tmp_path):
    """mmcv: iterations 2, 4, 6 of 3 two-iteration epochs; mmengine's epoch loop: epochs 2, 3."""
    cfg = mmcv_cfg(3, True, interval=2, by_epoch=False)
    converted, report = to_mmengine(cfg)
    assert mtrain_points(cfg, False, tmp_path) == [2, 4, 6]
    assert engine_points(converted['train_cfg'], tmp_path) == [2, 3]
    entry = _verdict(report, 'evaluation.by_epoch')
    assert entry.kind == 'lossy' and 'every 2 epochs' in entry.reason
