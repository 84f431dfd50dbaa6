"""mmcv 1.x's model contract: a model with its own ``train_step(data_batch, optimizer)``.

mmcv's ``EpochBasedRunner.run_iter`` calls ``model.train_step(data_batch,
self.optimizer)`` and ``val_step(data_batch, self.optimizer)``; the
``OptimizerHook`` backwards ``outputs['loss']``; ``log_vars`` are floats.
"""

import json

import pytest
import torch
from mmengine.config import Config

from mtrain.datasets import build_dataloader
from mtrain.parallel import MMDataParallel, ModelWrapper, has_own_steps
from mtrain.runner import EpochBasedRunner, build_runner


@pytest.fixture
def classes(toy_model, toy_dataset):
    """``(ToyModel, MmcvToyModel, ToyDataset)``: the conftest toy model and its mmcv twin."""
    return type(toy_model), mmcv_twin(type(toy_model)), type(toy_dataset)


def mmcv_twin(base):
    """``base`` (the conftest toy model) with mmcv 1.x steps; records the optimizers passed."""

    class MmcvToyModel(base):
        def __init__(self) -> None:
            super().__init__()
            self.optimizers_seen = []

        train_step, val_step = _train_step, _val_step

    return MmcvToyModel


def _train_step(self, data_batch, optimizer, **kwargs):
    self.optimizers_seen.append(optimizer)
    losses = self(**data_batch)
    loss = losses['loss_cls']
    # mmcv's _parse_losses: log_vars become Python floats
    log_vars = dict(loss_cls=loss.item(), acc=losses['acc'].item(), loss=loss.item())
    return dict(loss=loss, log_vars=log_vars, num_samples=len(data_batch['img']))


def _val_step(self, data_batch, optimizer=None, **kwargs):
    self.optimizers_seen.append(optimizer)
    logits = self.fc2(torch.relu(self.fc1(data_batch['img'])))
    loss = torch.nn.functional.cross_entropy(logits, data_batch['gt_label'])
    return dict(loss=loss, log_vars=dict(loss=loss.item()), num_samples=len(data_batch['img']))


def _train(model, dataset, work_dir, logger, workflow=(('train', 1), )):
    loader = build_dataloader(dataset, samples_per_gpu=8, workers_per_gpu=0, shuffle=True,
                              seed=0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    runner = EpochBasedRunner(model, optimizer=optimizer, work_dir=str(work_dir), logger=logger,
                              max_epochs=2)
    runner.register_training_hooks(lr_config=None, optimizer_config=dict(grad_clip=None),
                                   checkpoint_config=dict(interval=1),
                                   log_config=dict(interval=4, hooks=[dict(type='TextLoggerHook')]))
    runner.run([loader] * len(workflow), list(workflow))
    return runner


def test_the_rule_a_model_with_train_step_follows_mmcv_contract(classes):
    ToyModel, MmcvToyModel, _ = classes
    assert has_own_steps(MmcvToyModel()) and not has_own_steps(ToyModel())
    assert ModelWrapper(MmcvToyModel()).own_steps and not ModelWrapper(ToyModel()).own_steps


def test_mmcv_contract_trains_to_the_same_weights_as_mtrain_contract(tmp_path, logger, classes):
    """Same model, same data: train_step(batch, optimizer) + OptimizerHook == forward + hook."""
    ToyModel, MmcvToyModel, ToyDataset = classes
    workflow = [('train', 1), ('val', 1)]
    mmcv_runner = _train(MmcvToyModel(), ToyDataset(), tmp_path / 'mmcv', logger, workflow)
    plain_runner = _train(ToyModel(), ToyDataset(), tmp_path / 'plain', logger, workflow)
    model = mmcv_runner.model_wrapper.module
    assert isinstance(mmcv_runner.model_wrapper, ModelWrapper)  # it was wrapped, not taken as a wrapper
    # 8 train steps and 8 val steps per epoch; each got the runner's optimizer
    assert len(model.optimizers_seen) == 32
    assert all(o is mmcv_runner.optimizer for o in model.optimizers_seen)
    for name, value in plain_runner.model_wrapper.module.state_dict().items():
        torch.testing.assert_close(model.state_dict()[name], value, rtol=0, atol=1e-6)
    # Checkpoints hold the plain model's keys (no `module.`) and load into a fresh model
    ckpt = torch.load(tmp_path / 'mmcv' / 'epoch_2.pth', weights_only=True)
    MmcvToyModel().load_state_dict(ckpt['state_dict'])
    lines = [json.loads(l) for l in open(tmp_path / 'mmcv' / f'{mmcv_runner.timestamp}.log.json')]
    train = [l for l in lines if l.get('mode') == 'train']
    assert train[0]['loss'] > train[-1]['loss']  # float log_vars are logged as they come
    assert [l['mode'] for l in lines if l.get('mode') == 'val'] == ['val', 'val']


def test_mmdataparallel_runs_an_mmcv_model(tmp_path, logger, classes):
    _, MmcvToyModel, ToyDataset = classes
    runner = _train(MMDataParallel(MmcvToyModel(), device_ids=None), ToyDataset(), tmp_path,
                    logger)
    assert runner.model_name == 'MmcvToyModel' and runner.iter == 16
    with pytest.raises(ValueError, match='one GPU per process.*dist_train.sh'):
        MMDataParallel(MmcvToyModel(), device_ids=[0, 1])


def test_a_train_step_returning_no_dict_is_a_clear_error(tmp_path, logger, classes):
    ToyModel, _, ToyDataset = classes

    class Bad(ToyModel):
        def train_step(self, data_batch, optimizer):
            return self(**data_batch)['loss_cls']

    with pytest.raises(TypeError, match='must return a dict .*got Tensor'):
        _train(Bad(), ToyDataset(), tmp_path, logger)


def test_from_a_config_with_float_log_vars_and_the_nan_guard(tmp_path, logger, classes):
    """The builder's path: BasicBatchProcessor, OptimizerHook, NanGuardHook on mmcv's floats."""
    _, MmcvToyModel, ToyDataset = classes
    cfg = Config(dict(
        model=dict(type=MmcvToyModel), optimizer=dict(type='SGD', lr=0.1, momentum=0.9),
        optimizer_config=dict(grad_clip=dict(max_norm=1.0)),
        runner=dict(type='EpochBasedRunner', max_epochs=1), device='cpu',
        data=dict(samples_per_gpu=8, workers_per_gpu=0, train=dict(type=ToyDataset)),
        log_config=dict(interval=4, hooks=[dict(type='TextLoggerHook')]),
        nan_policy=dict(interval=2)))
    runner, loaders, workflow = build_runner(cfg, str(tmp_path), logger, seed=0)
    runner.run(loaders, workflow)
    assert runner.iter == 8 and runner.num_updates == 8
    assert isinstance(runner.outputs['log_vars']['loss'], float)
