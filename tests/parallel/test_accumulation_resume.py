"""Two ranks, gradient accumulation, a checkpoint inside a window: the resume is bitwise exact.

Inside a window each rank holds its own un-reduced gradient sums; the
checkpoint gathers them (``OptimStep.gather_window``) and each rank takes its
own back on resume.
"""

import os

import pytest
import torch

from dist_launch import launch
from toy_training import params, train_toy

pytestmark = pytest.mark.slow


def _job(rank, model_cls, dataset_cls, work_dir, out_dir, resume_from):
    # 64 samples, 8 per rank and step: 4 iterations an epoch, windows of 3, so
    # epoch_1.pth (after iteration 4) is written inside the second window.
    runner = train_toy(model_cls, dataset_cls, work_dir, 8, cumulative_iters=3,
                       resume_from=resume_from)
    torch.save({'params': params(runner.model_wrapper.module), 'num_updates': runner.num_updates},
               os.path.join(out_dir, f'rank{rank}.pt'))


def test_resume_inside_a_window_on_two_ranks_is_bitwise_exact(tmp_path, toy_model, toy_dataset):
    model_cls, dataset_cls = type(toy_model), type(toy_dataset)
    full, resumed = tmp_path / 'full', tmp_path / 'resumed'
    full.mkdir(), resumed.mkdir()
    codes, _ = launch(_job, model_cls, dataset_cls, str(full), str(full), None)
    assert codes == [0, 0]
    ckpt = torch.load(full / 'epoch_1.pth', weights_only=True)
    assert len(ckpt['hooks']['GradientCumulativeOptimizerHook']['grads_by_rank']) == 2
    codes, _ = launch(_job, model_cls, dataset_cls, str(resumed), str(resumed),
                      str(full / 'epoch_1.pth'))
    assert codes == [0, 0]
    for rank in (0, 1):
        a = torch.load(full / f'rank{rank}.pt', weights_only=True)
        b = torch.load(resumed / f'rank{rank}.pt', weights_only=True)
        assert a['num_updates'] == b['num_updates'] == 3  # 8 iterations in windows of 3
        for k, v in a['params'].items():
            assert torch.equal(v, b['params'][k]), (rank, k)
