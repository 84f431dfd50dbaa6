"""Detection-style evaluation across generations, against mmengine 0.10.7's real Runner.

``ToyBoxAP`` is a registered mmengine metric (``BaseMetric``: ``process`` collects
each image's detections and ground truth from the batch, ``compute_metrics``
scores the box mAP at IoU 0.5, keys prefixed ``toy_det/``); its mmcv-style
counterpart is ``ToyDetDataset.evaluate(results, metric='mAP')``. mmdet's classes
are not installed: this pair is the real thing at toy size. The same detector,
data and seed train two epochs in mmengine's Runner (``val_evaluator=ToyBoxAP``)
and in mtrain (the mmengine config directly, and converted to the mmcv schema);
each epoch's metrics must agree. Converting back to mmengine keeps the class.
"""

import logging
import os.path as osp
import sys

import numpy as np
import torch
from convert_harness import _one_thread
from mmengine.config import Config
from mmengine.evaluator import BaseMetric
from mmengine.hooks import Hook as EngineHook
from mmengine.model import BaseModel
from mmengine.registry import METRICS
from mmengine.runner import Runner
from torch.utils.data import DataLoader

from mtrain.config import check_config
from mtrain.config_convert import for_training, to_mmcv, to_mmengine
from mtrain.hooks import Hook
from mtrain.runner import build_runner

sys.path.insert(0, osp.join(osp.dirname(__file__), '..', 'evaluation'))
from toy_detector import NUM_CLASSES, ToyDetDataset, ToyDetector, average_precision  # noqa


@METRICS.register_module(force=True)
class ToyBoxAP(BaseMetric):
    """Box mAP at IoU ``iou_thr`` over :class:`ToyDetector`'s per-class detections."""

    default_prefix = 'toy_det'

    def __init__(self, metric: str = 'mAP', iou_thr: float = 0.5, **kwargs) -> None:
        super().__init__(**kwargs)
        assert metric == 'mAP', metric
        self.iou_thr = iou_thr

    def process(self, data_batch, data_samples) -> None:
        labels, boxes = data_batch['gt_labels'], data_batch['gt_bboxes']
        scale = data_batch['img_metas']['scale_factor']
        for dets, label, box, s in zip(data_samples, labels, boxes, scale):
            self.results.append((dets, label.cpu(), (box / s).cpu()))

    def compute_metrics(self, results) -> dict:
        dets = [r[0] for r in results]
        labels, boxes = torch.stack([r[1] for r in results]), torch.stack([r[2] for r in results])
        aps = [average_precision(dets, labels, boxes, c, self.iou_thr)
               for c in range(NUM_CLASSES)]
        return dict(mAP=float(np.mean(aps)))


class EngineToyDetector(BaseModel):
    """:class:`ToyDetector` (same init, seed 0) behind mmengine's model contract."""

    def __init__(self) -> None:
        super().__init__()
        self.det = ToyDetector()

    def forward(self, img, img_metas, gt_labels=None, gt_bboxes=None, mode='loss'):
        if mode == 'loss':
            return self.det.forward_train(img, img_metas, gt_labels, gt_bboxes)
        return self.det.simple_test(img, img_metas, rescale=True)


class EngineMetrics(EngineHook):
    def __init__(self) -> None:
        self.seen = []

    def after_val_epoch(self, runner, metrics=None) -> None:
        self.seen.append(dict(metrics))


class MtrainMetrics(Hook):
    priority = 'VERY_LOW'  # after EvalHook ('LOW') has evaluated the epoch

    def __init__(self) -> None:
        self.seen = []

    def after_train_epoch(self, runner) -> None:
        self.seen.append(dict(runner.eval_results))


def _loader(**dataset):
    return dict(batch_size=8, num_workers=0, dataset=dict(type='ToyDetDataset', **dataset),
                sampler=dict(type='DefaultSampler', shuffle=False))


ENGINE_CFG = dict(
    model=dict(type='ToyDetector'),
    optim_wrapper=dict(type='OptimWrapper', optimizer=dict(type='SGD', lr=0.2, momentum=0.9)),
    train_cfg=dict(type='EpochBasedTrainLoop', max_epochs=2, val_interval=1),
    train_dataloader=_loader(n=96, seed=1), val_dataloader=_loader(n=51, test_mode=True),
    val_cfg=dict(type='ValLoop'), val_evaluator=dict(type='ToyBoxAP'),
    default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=1,
                                       save_best='toy_det/mAP')))


def run_mmengine(work_dir):
    recorder = EngineMetrics()
    cfg = ENGINE_CFG
    with _one_thread():
        Runner(model=EngineToyDetector(), work_dir=work_dir,
               train_dataloader=DataLoader(ToyDetDataset(96, seed=1), batch_size=8),
               val_dataloader=DataLoader(ToyDetDataset(51), batch_size=8),
               optim_wrapper=cfg['optim_wrapper'], train_cfg=cfg['train_cfg'],
               val_cfg=cfg['val_cfg'], val_evaluator=cfg['val_evaluator'],
               default_hooks=dict(checkpoint=None, logger=None), custom_hooks=[recorder],
               default_scope='mmengine', log_level='WARNING').train()
    return [{k.split('/')[-1]: v for k, v in m.items()} for m in recorder.seen]


def run_mtrain(cfg, work_dir):
    cfg = dict(cfg, nan_policy=None, device='cpu', log_config=None)
    cfg = Config(cfg)
    check_config(cfg)
    runner, loaders, workflow = build_runner(cfg, work_dir, logging.getLogger('t'), seed=0)
    recorder = MtrainMetrics()
    runner.register_hook(recorder, 'VERY_LOW')
    with _one_thread():
        runner.run(loaders, workflow)
    return [{k: v for k, v in m.items() if k == 'mAP'} for m in recorder.seen]


def test_a_registered_detection_metric_gives_mmengines_numbers_in_mtrain(tmp_path):
    expected = run_mmengine(str(tmp_path / 'engine'))
    assert len(expected) == 2 and all(0.5 < m['mAP'] < 1 for m in expected)
    assert expected[0] != expected[1]
    converted, report = to_mmcv(ENGINE_CFG)
    assert converted['evaluation'] == dict(interval=1, metric='mAP', save_best='mAP')
    assert not report.is_lossy, report.format()
    assert "ToyBoxAP(metric='mAP', its default)" in report.format()
    for name, cfg in (('direct', for_training(ENGINE_CFG)), ('converted', converted)):
        got = run_mtrain(cfg, str(tmp_path / name))
        for a, b in zip(got, expected):
            assert abs(a['mAP'] - b['mAP']) <= 1e-6 * b['mAP'], (name, got, expected)
    assert osp.isfile(tmp_path / 'converted' / 'best_mAP_epoch_2.pth')  # save_best carried

    back, report = to_mmengine(converted, metric_classes={'mAP': 'ToyBoxAP'})
    assert not report.is_lossy, report.format()
    assert back['val_evaluator'] == dict(type='ToyBoxAP', metric='mAP')
    assert back['default_hooks']['checkpoint']['save_best'] == 'toy_det/mAP'


def test_a_registered_metric_without_a_metric_name_says_exactly_why():
    @METRICS.register_module(force=True)
    class ToyCount(BaseMetric):
        def __init__(self, iou_thr=0.5, **kwargs):
            super().__init__(**kwargs)

        def process(self, data_batch, data_samples):
            pass

        def compute_metrics(self, results):
            return {}

    cfg = dict(ENGINE_CFG, val_evaluator=dict(type='ToyCount'))
    _, report = to_mmcv(cfg)
    reason = {e.source: e.reason for e in report.lossy_entries}['val_evaluator']
    assert 'ToyCount names no 1.x metric: it takes no metric name (its arguments: iou_thr)' \
        in reason
    mmcv = dict(optimizer=dict(type='SGD', lr=0.1), runner=dict(type='EpochBasedRunner',
                                                                 max_epochs=1),
                data=dict(train=dict(type='T'), val=dict(type='V')),
                evaluation=dict(metric='mAP'))
    _, report = to_mmengine(mmcv, metric_classes={'mAP': 'ToyCount'})
    assert "ToyCount takes no metric name" in report.format()
    _, report = to_mmengine(dict(mmcv, evaluation=dict(metric='f1')))
    assert '--metric-class f1=TYPE' in report.format()
