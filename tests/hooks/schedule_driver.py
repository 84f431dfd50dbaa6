"""Drive LR / momentum hooks the way the runners call them, on a stand-in runner.

Shared by ``test_lr_updater.py`` and ``test_momentum_updater.py``. The golden
fixtures (``golden_lr.json``, ``golden_momentum.json``) were produced by
running mmcv 1.7.2's own ``lr_updater.py`` / ``momentum_updater.py`` through
the same calls as :func:`drive_epochs` (see docs/schedules.md). Their
``accumulation`` sections add runs whose optimizer updates come every
``cumulative_iters`` iterations, some skipped (``skipped_steps``, as fp16 skips
an overflowing step): mmcv's hooks count iterations, so neither changes a number.
"""

import copy
import json
import math
import os.path as osp
import types
from typing import Any, Dict, List, Optional

import torch
from torch import nn

import mtrain.hooks  # noqa: F401  (registers the policies)
from mtrain.registry import HOOKS, build
from mtrain.utils import get_priority

HERE = osp.dirname(__file__)


def load_golden(name: str) -> Dict[str, Any]:
    with open(osp.join(HERE, f'golden_{name}.json')) as f:
        return json.load(f)


def make_optimizer(kind: str = 'SGD') -> torch.optim.Optimizer:
    """Two param groups with different lrs and momenta (as in the golden fixtures)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    if kind == 'SGD':
        return torch.optim.SGD([
            dict(params=model[0].parameters(), lr=0.1, momentum=0.9),
            dict(params=model[1].parameters(), lr=0.01, momentum=0.8)], lr=0.1)
    return torch.optim.Adam([
        dict(params=model[0].parameters(), lr=1e-3, betas=(0.9, 0.999)),
        dict(params=model[1].parameters(), lr=5e-4, betas=(0.85, 0.99))], lr=1e-3)


def make_runner(optimizer, max_epochs: Optional[int], epoch_len: int, max_iters: int,
                cumulative_iters: int = 1, skipped_steps=()) -> types.SimpleNamespace:
    """The attributes the schedule hooks read, as the real runners define them.

    ``skipped_steps``: iterations whose optimizer step is skipped (no update).
    """
    return types.SimpleNamespace(
        optimizer=optimizer, epoch=0, iter=0, inner_iter=0, num_updates=0,
        max_epochs=max_epochs, max_iters=max_iters,
        max_updates=math.ceil(max_iters / cumulative_iters),
        updates_per_epoch=epoch_len / cumulative_iters, cumulative_iters=cumulative_iters,
        data_loader=None, logger=None, _loader=[None] * epoch_len,
        _skipped=frozenset(skipped_steps))


def build_hooks(case: Dict[str, Any]) -> list:
    """The case's hooks from their configs, in priority order (LR before momentum)."""
    hooks = [build(copy.deepcopy(case[key]), HOOKS, key)
             for key in ('lr_config', 'momentum_config') if case.get(key)]
    return sorted(hooks, key=lambda h: get_priority(h.priority))


def values(optimizer) -> Dict[str, List[float]]:
    groups = optimizer.param_groups
    return dict(lr=[g['lr'] for g in groups],
                momentum=[g['momentum'] if 'momentum' in g else g['betas'][0] for g in groups])


def _step(runner, hooks, record) -> None:
    """One iteration: before_train_iter, record, then the optimizer hook's bookkeeping."""
    for hook in hooks:
        hook.before_train_iter(runner)
    record.append(values(runner.optimizer))
    steps = (runner.iter + 1) % runner.cumulative_iters == 0 or runner.iter + 1 == runner.max_iters
    if steps and runner.iter not in runner._skipped:
        runner.num_updates += 1
    runner.iter += 1
    runner.inner_iter += 1


def drive_epochs(runner, hooks, max_epochs: int) -> List[Dict[str, List[float]]]:
    """EpochBasedRunner: before_run; per epoch before_train_epoch, then the iterations."""
    record: List[Dict[str, List[float]]] = []
    runner.data_loader = runner._loader
    for hook in hooks:
        hook.before_run(runner)
    for epoch in range(max_epochs):
        runner.epoch, runner.inner_iter = epoch, 0
        for hook in hooks:
            hook.before_train_epoch(runner)
        for _ in range(len(runner.data_loader)):
            _step(runner, hooks, record)
    return record


def drive_iters(runner, hooks) -> List[Dict[str, List[float]]]:
    """IterBasedRunner: no loader at before_run, no before_train_epoch; epoch follows the loader."""
    record: List[Dict[str, List[float]]] = []
    for hook in hooks:
        hook.before_run(runner)
        hook.before_epoch(runner)  # called once around the whole run
    epoch_len = len(runner._loader)
    while runner.iter < runner.max_iters:
        runner.data_loader = runner._loader
        runner.epoch = runner.iter // epoch_len
        _step(runner, hooks, record)
    return record


def run_case(case: Dict[str, Any], layout: Dict[str, int], driver: str = 'epoch',
             cumulative_iters: Optional[int] = None) -> List[Dict[str, List[float]]]:
    """Build the case's hooks and drive them.

    ``cumulative_iters`` (default: the case's, else 1) and the case's
    ``skipped_steps`` decide when ``runner.num_updates`` advances.
    """
    if cumulative_iters is None:
        cumulative_iters = case.get('cumulative_iters', 1)
    runner = make_runner(make_optimizer(case['optimizer']),
                         layout['max_epochs'] if driver == 'epoch' else None,
                         layout['epoch_len'], layout['max_iters'], cumulative_iters,
                         case.get('skipped_steps', ()))
    hooks = build_hooks(case)
    if driver == 'epoch':
        return drive_epochs(runner, hooks, layout['max_epochs'])
    return drive_iters(runner, hooks)


def column(record: List[Dict[str, List[float]]], key: str) -> List[List[float]]:
    return [row[key] for row in record]
