"""Checks that need the built objects, run after building and before the first iteration.

``mtrain.config`` checks what a config file can show on its own (typos, missing
keys). Some mistakes only show once the model, the datasets and the runner
exist: a model with fewer outputs than the dataset has classes, a runner
length the runner type does not read, a dataset whose items a model cannot
take. Without these checks they surface as a traceback at the first loss or
after a whole epoch. Each check raises :class:`ConfigError` naming the key
and the fix; add a new one to :data:`CHECKS`.
"""

import contextlib
import inspect
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional

import numpy as np
import torch

from ..datasets import dataset_num_classes
from ..utils import ConfigError
from .base_runner import BaseRunner
from .iter_based_runner import IterBasedRunner


@dataclass
class Preflight:
    """What the checks look at: the built runner, its datasets by split, and two config nodes.

    Attributes:
        runner: the built runner (its model is wrapped; ``model.module`` is the user's).
        datasets: ``{'train': dataset, 'val': dataset}``, those that were built.
        model_cfg: ``cfg.model`` (read for ``num_classes``, ``head.num_classes``).
        runner_cfg: ``cfg.runner`` with its ``type`` filled in.
        iters_per_epoch: length of the train loader (to convert epochs and iterations).
    """
    runner: BaseRunner
    datasets: Dict[str, Any]
    model_cfg: Dict[str, Any] = field(default_factory=dict)
    runner_cfg: Dict[str, Any] = field(default_factory=dict)
    iters_per_epoch: Optional[int] = None


def run_preflight(state: Preflight) -> None:
    """Run every check in :data:`CHECKS`; the first mistake raises :class:`ConfigError`."""
    for check in CHECKS:
        check(state)


def check_run_length(state: Preflight) -> None:
    """IterBasedRunner counts iterations, EpochBasedRunner epochs: the other key is not read.

    mmcv 1.x fails at ``run()`` (IterBasedRunner) or runs nothing sensible;
    here the message converts the value with the train loader's length.
    """
    runner, per_epoch = state.runner, state.iters_per_epoch
    kind = state.runner_cfg.get('type', type(runner).__name__)
    if isinstance(runner, IterBasedRunner) and runner.max_iters is None:
        given = state.runner_cfg.get('max_epochs')
        hint = (f' (max_epochs={given} is max_iters={given * per_epoch} at {per_epoch} '
                'iterations per epoch)' if isinstance(given, int) and per_epoch else '')
        raise ConfigError(f'{kind} counts iterations and does not read max_epochs; set '
                          f'runner.max_iters=N{hint}, or use EpochBasedRunner',
                          key='runner.max_epochs' if given is not None else 'runner.max_iters')
    if not isinstance(runner, IterBasedRunner) and runner.max_epochs is None:
        given = state.runner_cfg.get('max_iters')
        hint = (f' (max_iters={given} is about {max(1, round(given / per_epoch))} epochs at '
                f'{per_epoch} iterations per epoch)' if isinstance(given, int) and per_epoch
                else '')
        raise ConfigError(f'{kind} counts epochs and does not read max_iters; set '
                          f"runner.max_epochs=N{hint}, or use type='IterBasedRunner'",
                          key='runner.max_iters' if given is not None else 'runner.max_epochs')


def check_num_classes(state: Preflight) -> None:
    """A model scoring fewer classes than a dataset declares fails at the first loss.

    Config example: ``model = dict(type='LeNet', num_classes=10)`` or
    ``model.head.num_classes``; the dataset declares ``CLASSES`` or ``num_classes``.
    More outputs than classes is allowed (unused outputs are harmless).
    """
    key, scored = _model_num_classes(state.model_cfg)
    if scored is None:
        return
    for split, dataset in state.datasets.items():
        count = dataset_num_classes(dataset)
        if count is not None and scored < count:
            names = list(getattr(dataset, 'CLASSES', None) or [])
            shown = f" ({', '.join(map(str, names[:5]))}{', ...' if len(names) > 5 else ''})" \
                if names else ''
            raise ConfigError(f'the model scores {scored} classes but data.{split} '
                              f'({type(dataset).__name__}) has {count}{shown}; set '
                              f'{key}={count}', key=key)


def _model_num_classes(model_cfg: Dict[str, Any]) -> tuple:
    if isinstance(model_cfg.get('num_classes'), int):
        return 'model.num_classes', model_cfg['num_classes']
    head = model_cfg.get('head')
    if isinstance(head, dict) and isinstance(head.get('num_classes'), int):
        return 'model.head.num_classes', head['num_classes']
    return None, None


def check_items_carry_labels(state: Preflight) -> None:
    """A model whose ``forward`` takes ``gt_label`` cannot train on bare-tensor items.

    Without this the model reports that it "needs gt_label", which points at
    the model, while the fix is in the dataset's ``__getitem__``.
    """
    dataset = state.datasets.get('train')
    model = getattr(state.runner.model, 'module', state.runner.model)
    try:
        takes_label = 'gt_label' in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return
    if dataset is None or not takes_label or not hasattr(dataset, '__getitem__'):
        return
    try:
        with _rng_untouched():  # reading an item must not shift a seeded run
            item = dataset[0]
    except Exception:  # noqa: BLE001 - the loader reports its own errors with context
        return
    if isinstance(item, torch.Tensor):
        raise ConfigError(f'{type(dataset).__name__}[0] is a bare tensor, so {type(model).__name__}'
                          ' gets no gt_label; return the label with the image from '
                          '__getitem__: a tuple (img, label) or dict(img=img, gt_label=label) '
                          '(docs/your_own_model_and_data.md)', key='data.train')


@contextlib.contextmanager
def _rng_untouched() -> Iterator[None]:
    states = random.getstate(), np.random.get_state(), torch.get_rng_state()
    try:
        yield
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])


#: The checks :func:`run_preflight` runs, in order.
CHECKS: List[Callable[[Preflight], None]] = [
    check_run_length, check_num_classes, check_items_carry_labels]
