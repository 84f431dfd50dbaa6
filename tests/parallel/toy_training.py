"""The toy training run the distributed tests compare: one process vs two ranks."""

from typing import Callable, Optional

import torch
from torch import nn

from mtrain.datasets import build_dataloader
from mtrain.hooks import DistSamplerSeedHook
from mtrain.parallel import ModelWrapper, MTDistributedDataParallel
from mtrain.runner import EpochBasedRunner
from mtrain.utils import get_dist_info, get_logger


def train_toy(model_cls, dataset_cls, work_dir, samples_per_gpu: int, cumulative_iters: int = 1,
              wrap: Optional[Callable[[nn.Module], nn.Module]] = None, max_epochs: int = 2,
              resume_from: Optional[str] = None,
              checkpoint_config: Optional[dict] = None,
              lr_config: Optional[dict] = None) -> EpochBasedRunner:
    """Train the conftest toy model on 64 toy samples with SGD + momentum.

    Gradients are clipped to norm 0.5 (most steps clip: the global norm must
    be right). Writes ``epoch_N.pth`` and ``rank<r>.log.json`` (logging every
    2 iterations) to ``work_dir``. ``wrap`` wraps the model when running on
    several ranks (default DDP); one process uses ``ModelWrapper``.
    ``checkpoint_config`` replaces ``dict(interval=1)``; ``lr_config``: a schedule.
    """
    model = model_cls()
    rank, world_size = get_dist_info()
    if world_size == 1:
        wrapped = ModelWrapper(model)
    else:
        wrapped = (wrap or MTDistributedDataParallel)(model)
    optimizer = torch.optim.SGD(wrapped.parameters(), lr=0.1, momentum=0.9)
    loader = build_dataloader(dataset_cls(64), samples_per_gpu, 0, shuffle=True, seed=3)
    runner = EpochBasedRunner(wrapped, optimizer=optimizer, work_dir=str(work_dir),
                              logger=get_logger(), max_epochs=max_epochs)
    optimizer_config = dict(type='GradientCumulativeOptimizerHook',
                            cumulative_iters=cumulative_iters, grad_clip=dict(max_norm=0.5))
    runner.register_training_hooks(lr_config=lr_config, optimizer_config=optimizer_config,
                                   checkpoint_config=checkpoint_config or dict(interval=1),
                                   log_config=dict(interval=2, hooks=[dict(type='TextLoggerHook')]))
    runner.register_hook(DistSamplerSeedHook())
    if resume_from is not None:
        runner.resume(resume_from)
    runner.timestamp = f'rank{rank}'
    runner.run([loader], [('train', 1)])
    return runner


def params(module: nn.Module):
    return {k: v.detach().clone() for k, v in module.state_dict().items()}
