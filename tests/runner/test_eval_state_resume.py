"""An epoch's checkpoint holds that epoch's evaluation: best score and early stopping."""

import os

import pytest
import torch

from mtrain.datasets import build_dataloader
from mtrain.hooks import CheckpointHook, EarlyStoppingHook, EvalHook, OptimizerHook
from mtrain.runner import EpochBasedRunner


def _run(work_dir, toy_dataset, logger, resume_from=None, max_epochs=8):
    """8 epochs at most; with this lr early stopping ends it after epoch 4, best at epoch 2."""
    model = _run.model_cls()
    runner = EpochBasedRunner(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.05),
                              work_dir=str(work_dir), logger=logger, max_epochs=max_epochs)
    runner.register_hook(OptimizerHook())
    runner.register_hook(CheckpointHook(interval=1))
    val = build_dataloader(type(toy_dataset)(32, seed=1), 8, 0, shuffle=False)
    runner.register_hook(EvalHook(val, save_best='accuracy'), 'LOW')
    runner.register_hook(EarlyStoppingHook(monitor='accuracy', patience=2))
    if resume_from is not None:
        runner.resume(resume_from)
    runner.run([build_dataloader(toy_dataset, 8, 0, shuffle=True, seed=0)], [('train', 1)])
    return runner


def _best_files(work_dir):
    return sorted(n for n in os.listdir(work_dir) if n.startswith('best_'))


@pytest.mark.parametrize('epoch', [1, 4])
def test_resumed_run_trains_the_same_epochs_and_keeps_one_best(tmp_path, toy_model, toy_dataset,
                                                               logger, epoch):
    _run.model_cls = type(toy_model)
    full = _run(tmp_path / 'full', toy_dataset, logger)
    assert full.epoch == 4 and _best_files(tmp_path / 'full') == ['best_accuracy_epoch_2.pth']
    # A run killed right after epoch `epoch`'s checkpoint, then resumed from it.
    resumed_dir = tmp_path / 'resumed'
    _run(resumed_dir, toy_dataset, logger, max_epochs=epoch)
    resumed = _run(resumed_dir, toy_dataset, logger, str(resumed_dir / f'epoch_{epoch}.pth'))
    assert resumed.epoch == full.epoch
    assert _best_files(resumed_dir) == _best_files(tmp_path / 'full')
    for a, b in zip(full.model.parameters(), resumed.model.parameters()):
        assert torch.equal(a, b)
