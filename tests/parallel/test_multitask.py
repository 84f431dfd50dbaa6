"""MultiBatchProcessor with task-specific heads on 2 ranks: no head drifts apart."""

import os

import pytest
import torch
from torch import nn
from torch.utils.data import Dataset, default_collate

from dist_launch import launch
from mtrain.datasets import build_dataloader
from mtrain.parallel import ModelWrapper, MTDistributedDataParallel
from mtrain.processors import MultiBatchProcessor
from mtrain.runner import IterBasedRunner
from mtrain.utils import get_dist_info, get_logger
from toy_training import params

pytestmark = pytest.mark.slow


class _TwoTaskDataset(Dataset):
    """Each item is one sample of task ``a`` and one of task ``b`` (a tuple: two batches)."""

    def __init__(self, n: int = 32) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(2, n, 4, generator=g)
        self.y = torch.randn(2, n, 2, generator=g)

    def __len__(self) -> int:
        return self.x.shape[1]

    def __getitem__(self, i):
        return tuple({'img': self.x[t, i], 'target': self.y[t, i], 'task_name': 'ab'[t]}
                     for t in range(2))


class _MultiTaskModel(nn.Module):
    """A shared trunk, one head per task: each batch reaches only its own head."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.trunk = nn.Linear(4, 8)
        self.heads = nn.ModuleDict({'a': nn.Linear(8, 2), 'b': nn.Linear(8, 2)})

    def forward(self, img, target, task_name):
        out = self.heads[task_name[0]](torch.relu(self.trunk(img)))
        return {'loss_mse': (out - target).pow(2).mean()}


def _collate_tasks(items):
    """A tuple with one batch per task (default_collate would make it a list)."""
    return tuple(default_collate(list(task_items)) for task_items in zip(*items))


def _train_multitask(samples_per_gpu: int) -> IterBasedRunner:
    model = _MultiTaskModel()
    wrapped = (MTDistributedDataParallel(model, find_unused_parameters=True)
               if get_dist_info()[1] > 1 else ModelWrapper(model))
    optimizer = torch.optim.SGD(wrapped.parameters(), lr=0.1, momentum=0.9)
    runner = IterBasedRunner(wrapped, optimizer=optimizer, batch_processor=MultiBatchProcessor(),
                             logger=get_logger(), max_iters=6)
    runner.register_training_hooks(optimizer_config={})
    loader = build_dataloader(_TwoTaskDataset(), samples_per_gpu, 0, shuffle=True, seed=1,
                              collate_fn=_collate_tasks)
    runner.run([loader], [('train', 1)])
    return runner


def _multitask_job(rank, out_dir):
    runner = _train_multitask(4)
    torch.save(params(runner.model_wrapper.module), os.path.join(out_dir, f'rank{rank}.pt'))


def test_multi_batch_heads_stay_identical_on_both_ranks_and_match_one_process(tmp_path):
    reference = params(_train_multitask(8).model_wrapper.module)
    codes, _ = launch(_multitask_job, str(tmp_path))
    assert codes == [0, 0]
    r0, r1 = (torch.load(tmp_path / f'rank{r}.pt', weights_only=True) for r in (0, 1))
    for name, value in reference.items():
        assert torch.equal(r0[name], r1[name]), f'{name} differs between the ranks'
        torch.testing.assert_close(r0[name], value, rtol=0, atol=1e-6)
    assert not torch.equal(reference['heads.a.weight'], _MultiTaskModel().heads.a.weight)
