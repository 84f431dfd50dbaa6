"""An mmcv-contract model (its own ``train_step``) under 2-process gloo DDP.

``MMDistributedDataParallel.train_step`` runs the model's ``train_step``
through DDP's forward machinery, so the backward of the returned ``loss``
averages gradients over ranks: 2 ranks of batch B end with the weights of
one process of batch 2B.
"""

import os

import pytest
import torch

from dist_launch import launch
from mtrain.parallel import MMDistributedDataParallel
from toy_training import params, train_toy

pytestmark = pytest.mark.slow


def _mmcv_twin(base):
    """The conftest toy model with mmcv 1.x's ``train_step``; records the optimizers passed."""

    class MmcvToyModel(base):
        def __init__(self) -> None:
            super().__init__()
            self.optimizers_seen = []

        def train_step(self, data_batch, optimizer, **kwargs):
            self.optimizers_seen.append(optimizer)
            loss = self(**data_batch)['loss_cls']
            return dict(loss=loss, log_vars=dict(loss=loss.item()),
                        num_samples=len(data_batch['img']))

    return MmcvToyModel


def _job(rank, MmcvToyModel, ToyDataset, work_dir, out_dir):
    runner = train_toy(MmcvToyModel, ToyDataset, work_dir, 8, wrap=MMDistributedDataParallel)
    seen = runner.model_wrapper.module.optimizers_seen
    torch.save({'params': params(runner.model_wrapper.module), 'steps': len(seen),
                'all_runner_optimizer': all(o is runner.optimizer for o in seen)},
               os.path.join(out_dir, f'rank{rank}.pt'))


def test_two_ranks_of_an_mmcv_model_equal_one_process_of_twice_the_batch(tmp_path, toy_model,
                                                                         toy_dataset):
    MmcvToyModel, ToyDataset = _mmcv_twin(type(toy_model)), type(toy_dataset)
    reference = train_toy(MmcvToyModel, ToyDataset, tmp_path / 'single', 16)
    out = tmp_path / 'out'
    out.mkdir()
    codes, _ = launch(_job, MmcvToyModel, ToyDataset, tmp_path / 'ddp', str(out), timeout=300)
    assert codes == [0, 0]
    expected = params(reference.model_wrapper.module)
    for rank in (0, 1):
        result = torch.load(out / f'rank{rank}.pt', weights_only=True)
        assert result['steps'] == 8 and result['all_runner_optimizer']  # 4 iters x 2 epochs
        for name, value in expected.items():
            torch.testing.assert_close(result['params'][name], value, rtol=0, atol=1e-6)
