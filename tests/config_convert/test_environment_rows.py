"""The environment rows of the mapping table: where each key lands, what mmengine makes of it.

These keys change no number in one process (DDP, workers, cuDNN), so the
check is the mapping itself, both ways and round trip, plus mmengine 0.10.7's
own code on what it reads: ``convert_sync_batchnorm`` takes the converted
``sync_bn`` (mtrain's ``True`` raised there), and ``Runner.wrap_model`` reads
a top-level ``find_unused_parameters`` only without ``model_wrapper_cfg``.
"""

import pytest
from mmengine.model import convert_sync_batchnorm
from torch import nn

from mtrain.config_convert import to_mmcv, to_mmengine

SGD = dict(type='SGD', lr=0.02)
RUNNER = dict(type='EpochBasedRunner', max_epochs=2)
TRAIN = dict(by_epoch=True, max_epochs=2)
ENV = dict(seed=3, deterministic=True, cudnn_benchmark=True, dist_params=dict(backend='gloo'),
           mp_start_method='spawn', opencv_num_threads=0, auto_resume=True, work_dir='w',
           log_level='INFO', custom_imports=dict(imports=['m'], allow_failed_imports=False),
           auto_scale_lr=dict(enable=False, base_batch_size=16), sync_bn=True,
           find_unused_parameters=True, compile=dict(mode='max-autotune'))


def test_environment_keys_map_exactly_and_round_trip():
    engine, report = to_mmengine(dict(optimizer=SGD, runner=RUNNER, **ENV))
    assert not report.is_lossy, report.format()
    assert engine['randomness'] == dict(seed=3, deterministic=True)
    assert engine['env_cfg'] == dict(cudnn_benchmark=True, dist_cfg=dict(backend='gloo'),
                                     mp_cfg=dict(mp_start_method='spawn', opencv_num_threads=0))
    assert (engine['resume'], engine['sync_bn'], engine['find_unused_parameters']) == (
        True, 'torch', True)
    back, report = to_mmcv(engine)
    assert not report.is_lossy, report.format()
    assert {k: back[k] for k in ENV} == ENV


def test_sync_bn_is_an_implementation_name_in_mmengine():
    engine, _ = to_mmengine(dict(optimizer=SGD, runner=RUNNER, sync_bn=True))
    converted = convert_sync_batchnorm(nn.Sequential(nn.BatchNorm1d(4)), engine['sync_bn'])
    assert isinstance(converted[0], nn.SyncBatchNorm)
    with pytest.raises(ValueError):  # what the verbatim copy of mtrain's True did
        convert_sync_batchnorm(nn.Sequential(nn.BatchNorm1d(4)), True)
    assert 'sync_bn' not in to_mmengine(dict(optimizer=SGD, runner=RUNNER, sync_bn=False))[0]
    back, report = to_mmcv(dict(optim_wrapper=dict(optimizer=SGD), train_cfg=TRAIN,
                                sync_bn='mmcv'))
    assert back['sync_bn'] is True and "torch's SyncBatchNorm" in report.lossy_entries[0].reason


def test_find_unused_parameters_beside_a_model_wrapper():
    engine, report = to_mmengine(dict(optimizer=SGD, runner=RUNNER, find_unused_parameters=True,
                                      model_wrapper=dict(broadcast_buffers=False)))
    assert 'find_unused_parameters' not in engine  # mmengine would ignore it there
    assert engine['model_wrapper_cfg'] == dict(type='MMDistributedDataParallel',
                                               broadcast_buffers=False,
                                               find_unused_parameters=True)
    back, report = to_mmcv(dict(optim_wrapper=dict(optimizer=SGD), train_cfg=TRAIN,
                                find_unused_parameters=True,
                                model_wrapper_cfg=dict(type='MMDistributedDataParallel')))
    assert 'find_unused_parameters' not in back and not report.is_lossy
    assert back['model_wrapper'] == dict(type='MTDistributedDataParallel')
