"""Issue 23 item 7: evaluation across generations, any metric type mapped or refused with why."""

import logging

import pytest
import torch
from convert_harness import CvToyData, _one_thread
from mmengine.config import Config

from mtrain.config import check_config
from mtrain.config_convert import for_training, to_mmcv, to_mmengine
from mtrain.registry import DATASETS
from mtrain.runner import build_runner


@DATASETS.register_module(force=True)
class DetToyData(CvToyData):
    """A dataset evaluating itself the mmdet 2.x way: ``evaluate(results, metric='mAP')``."""

    def evaluate(self, results, metric='mAP', logger=None, **kwargs):
        if metric != 'mAP':
            raise KeyError(f'metric {metric} is not supported')
        scores = torch.stack(list(results)) if isinstance(results, list) else results
        return {'mAP': float((scores.argmax(1) == self.y).float().mean())}


def engine_detector(**evaluator):
    loader = dict(batch_size=8, dataset=dict(type='DetToyData'),
                  sampler=dict(type='DefaultSampler', shuffle=False))
    return dict(model=dict(type='CvToyNet'), optim_wrapper=dict(optimizer=dict(
        type='SGD', lr=0.1)), train_cfg=dict(by_epoch=True, max_epochs=2, val_interval=1),
        train_dataloader=loader, val_dataloader=dict(loader), val_cfg=dict(type='ValLoop'),
        val_evaluator=dict(type='VOCMetric', **evaluator),
        default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=1,
                                           save_best='pascal_voc/mAP')))


def test_a_detection_evaluator_maps_onto_the_datasets_own_metric(tmp_path):
    cfg = engine_detector(metric='mAP', eval_mode='11points')
    converted, report = to_mmcv(cfg)
    assert converted['evaluation'] == dict(interval=1, metric='mAP', save_best='mAP')
    assert [e.source for e in report.lossy_entries] == ['val_evaluator.eval_mode']
    assert 'VOCMetric' in {e.source: e.reason for e in report.entries}['val_evaluator']
    trained = for_training(cfg)
    trained.update(nan_policy=None, device='cpu')
    trained = Config(trained)
    check_config(trained)
    runner, loaders, workflow = build_runner(trained, str(tmp_path), logging.getLogger('t'))
    with _one_thread():
        runner.run(loaders, workflow)  # before: KeyError 'metric accuracy is not supported'
    assert any(name.startswith('best_mAP') for name in __import__('os').listdir(tmp_path))


def test_an_evaluator_without_a_metric_name_says_why_and_keeps_the_dataset_default():
    cfg = engine_detector()
    cfg['val_evaluator'] = dict(type='DumpResults', out_file_path='r.pkl')
    converted, report = to_mmcv(cfg)
    assert 'metric' not in converted['evaluation']
    reasons = {e.source: e.reason for e in report.lossy_entries}
    assert "DumpResults names no 1.x metric" in reasons['val_evaluator']


def test_save_best_without_an_evaluator_is_reported_under_its_own_key():
    cfg = engine_detector(metric='mAP')
    del cfg['val_evaluator'], cfg['val_dataloader']
    _, report = to_mmcv(cfg)
    assert 'default_hooks.checkpoint.save_best' in {e.source for e in report.lossy_entries}
    assert not any(e.source.startswith('checkpoint_config') for e in report.entries)


@pytest.mark.parametrize('metric, evaluator', [
    ('mAP', dict(type='VOCMetric', metric='mAP')),
    (['bbox', 'segm'], dict(type='CocoMetric', metric=['bbox', 'segm'])),
    ('mIoU', dict(type='IoUMetric', iou_metrics=['mIoU'])),
    (['accuracy', 'accuracy_top5'], dict(type='Accuracy', topk=(1, 5))),
])
def test_mmcv_metrics_map_to_their_metric_classes(metric, evaluator):
    mmcv = dict(optimizer=dict(type='SGD', lr=0.1), runner=dict(type='EpochBasedRunner',
                                                                 max_epochs=2),
                data=dict(train=dict(type='T'), val=dict(type='V')),
                evaluation=dict(interval=1, metric=metric))
    engine, report = to_mmengine(mmcv)
    assert engine['val_evaluator'] == evaluator
    assert not report.is_lossy, report.format()
    back, _ = to_mmcv(engine)
    assert back['evaluation']['metric'] == metric


def test_a_metric_only_the_dataset_knows_is_lossy_and_named():
    mmcv = dict(optimizer=dict(type='SGD', lr=0.1), runner=dict(type='EpochBasedRunner',
                                                                 max_epochs=2),
                data=dict(train=dict(type='T'), val=dict(type='V')),
                evaluation=dict(interval=1, metric='my_f1'))
    engine, report = to_mmengine(mmcv)
    [entry] = report.lossy_entries
    assert entry.source == 'evaluation.metric' and "'my_f1'" in entry.reason
    assert 'val_evaluator' not in engine and 'val_dataloader' not in engine
