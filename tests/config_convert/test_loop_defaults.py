"""Issue 23 item 5: each framework's defaults for iteration loops, from one table."""

import copy
import logging
import os
import sys

import pytest
from convert_harness import _TOY, CvToyData, EngineToyNet, _one_thread
from mmengine.config import Config
from mmengine.dataset import InfiniteSampler
from mmengine.runner import Runner
from torch.utils.data import DataLoader

from mtrain.config import check_config
from mtrain.config_convert import for_training, to_mmcv, to_mmengine
from mtrain.runner import build_runner
from mtrain.utils import ConfigError

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), 'tools')

# An mmdet-2.x 270k-iteration schedule: IterBasedRunner, no by_epoch anywhere.
MMDET_270K = dict(
    model=dict(type='X'), optimizer=dict(type='SGD', lr=0.02, momentum=0.9, weight_decay=1e-4),
    optimizer_config=dict(grad_clip=None),
    lr_config=dict(policy='step', warmup='linear', warmup_iters=500, warmup_ratio=0.001,
                   step=[210000, 250000]),
    runner=dict(type='IterBasedRunner', max_iters=270000),
    checkpoint_config=dict(interval=10000), log_config=dict(interval=50),
    evaluation=dict(interval=10000), data=dict(val=dict(type='V'), train=dict(type='T')))


def test_iteration_runner_defaults_are_written_out_for_mmengine():
    engine, report = to_mmengine(MMDET_270K)
    assert not report.is_lossy, report.format()
    warmup, step = engine['param_scheduler']
    assert step == dict(type='MultiStepLR', milestones=[210000, 250000], gamma=0.1,
                        by_epoch=False, begin=0, end=270000)
    assert engine['default_hooks']['checkpoint'] == dict(type='CheckpointHook', interval=10000,
                                                         by_epoch=False)
    assert engine['log_processor'] == dict(by_epoch=False)
    assert engine['train_cfg'] == dict(type='IterBasedTrainLoop', max_iters=270000,
                                       val_interval=10000)


def _train_mtrain(engine_cfg, work_dir):
    cfg = for_training(dict(model=_TOY['model'], train_dataloader=dict(
        batch_size=8, dataset=dict(type='CvToyData'),
        sampler=dict(type='DefaultSampler', shuffle=False)), **engine_cfg))
    cfg.update(nan_policy=None, device='cpu')
    cfg = Config(cfg)
    check_config(cfg)
    runner, loaders, workflow = build_runner(cfg, work_dir, logging.getLogger('mtrain.loop'))
    with _one_thread():
        runner.run(loaders, workflow)


def _checkpoints(work_dir):
    return sorted(n for n in os.listdir(work_dir) if n.endswith('.pth') and n != 'latest.pth')


@pytest.mark.parametrize('checkpoint, expected', [
    (None, ['iter_30.pth']),  # mmengine's default hook: interval=1, by epoch: one, at the end
    (dict(type='CheckpointHook', interval=1000), ['iter_30.pth']),  # save_last
    (dict(type='CheckpointHook', interval=10, by_epoch=False),
     ['iter_10.pth', 'iter_20.pth', 'iter_30.pth']),
    (dict(type='CheckpointHook', interval=1000, save_last=False), []),
])
def test_mmengine_iteration_loop_checkpoints_as_mmengine(checkpoint, expected, tmp_path):
    engine = dict(optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.01)),
                  train_cfg=dict(type='IterBasedTrainLoop', max_iters=30),
                  default_hooks=dict(logger=None))
    if checkpoint is not None:
        engine['default_hooks']['checkpoint'] = checkpoint
    _train_mtrain(engine, str(tmp_path))
    assert _checkpoints(tmp_path) == expected


def test_mmengine_itself_writes_one_checkpoint_in_an_iteration_loop(tmp_path):
    """The reference for the test above: mmengine 0.10's Runner with its default hooks."""
    data = CvToyData()
    runner = Runner(model=EngineToyNet(), work_dir=str(tmp_path), experiment_name='ckpt',
                    train_dataloader=DataLoader(data, batch_size=8,
                                                sampler=InfiniteSampler(data, shuffle=False)),
                    optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.01)),
                    train_cfg=dict(type='IterBasedTrainLoop', max_iters=30),
                    default_scope='mmengine', log_level='WARNING')
    with _one_thread():
        runner.train()
    assert _checkpoints(tmp_path) == ['epoch_1.pth']


def test_run_length_key_of_the_other_loop_is_one_line_in_both_directions():
    engine = dict(optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)),
                  train_cfg=dict(type='IterBasedTrainLoop', max_epochs=12))
    with pytest.raises(ConfigError) as e:
        to_mmcv(engine)
    assert e.value.key == 'train_cfg.max_epochs' and 'max_iters' in str(e.value)
    mmcv = dict(optimizer=dict(type='SGD', lr=0.1),
                runner=dict(type='IterBasedRunner', max_epochs=12))
    with pytest.raises(ConfigError) as e:
        to_mmengine(mmcv)
    assert e.value.key == 'runner.max_epochs' and 'runner.max_iters' in str(e.value)


def _convert_tool():
    sys.path.insert(0, TOOLS)
    try:
        import convert_config
    finally:
        sys.path.remove(TOOLS)
    return convert_config


def test_convert_tool_does_not_import_custom_imports(tmp_path, capsys):
    config = tmp_path / 'project.py'
    config.write_text("custom_imports = dict(imports=['my_project_not_installed.models'])\n"
                      "model = dict(type='LeNet')\noptimizer = dict(type='SGD', lr=0.1)\n"
                      "runner = dict(type='IterBasedRunner', max_epochs=3)\n")
    tool = _convert_tool()
    assert tool.main([str(config), '--to', 'mmengine']) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'runner.max_epochs' in err[0] and 'Traceback' not in err[0]
    config.write_text(config.read_text().replace('max_epochs', 'max_iters'))
    assert tool.main([str(config), '--to', 'mmengine', '--out', str(tmp_path / 'o.py')]) == 0
    assert "my_project_not_installed.models" in (tmp_path / 'o.py').read_text()


def test_defaults_do_not_change_the_source_config():
    before = copy.deepcopy(MMDET_270K)
    to_mmengine(MMDET_270K)
    assert MMDET_270K == before


def test_mmengine_only_checkpoint_arguments_are_reported_not_passed_on():
    engine = dict(optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)),
                  train_cfg=dict(type='EpochBasedTrainLoop', max_epochs=3),
                  default_hooks=dict(checkpoint=dict(
                      type='CheckpointHook', interval=1, save_begin=2, published_keys=['meta'],
                      save_param_scheduler=True, max_keep_ckpts=2)))
    converted, report = to_mmcv(engine)
    assert converted['checkpoint_config'] == dict(interval=1, max_keep_ckpts=2, by_epoch=True)
    assert {e.source for e in report.lossy_entries} == {
        'default_hooks.checkpoint.save_begin', 'default_hooks.checkpoint.published_keys'}
