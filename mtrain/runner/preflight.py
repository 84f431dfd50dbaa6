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
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np
import torch

from torch.nn.utils import clip_grad_norm_

from ..datasets import dataset_num_classes
from ..parallel import has_own_steps, unwrap
from ..processors import BasicBatchProcessor
from ..utils import ConfigError
from ..utils.errors import did_you_mean
from .collate_check import collate_problem
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
        train_loader: the train loader (its ``collate_fn`` batches the items).
        workflow: the run's phases, e.g. ``[('train', 1), ('val', 1)]``.
    """
    runner: BaseRunner
    datasets: Dict[str, Any]
    model_cfg: Dict[str, Any] = field(default_factory=dict)
    runner_cfg: Dict[str, Any] = field(default_factory=dict)
    iters_per_epoch: Optional[int] = None
    train_loader: Any = None
    workflow: List[Tuple[str, int]] = field(default_factory=list)


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


def check_items_collate(state: Preflight) -> None:
    """The train loader's ``collate_fn`` batches two items without error, metas as a list.

    Reads ``dataset[0]`` and ``dataset[1]`` (the RNG restored) and collates
    them as the loader would; see :mod:`.collate_check`.
    """
    loader = state.train_loader
    dataset = getattr(loader, 'dataset', None)
    if dataset is None or not hasattr(dataset, '__getitem__'):
        return
    try:
        with _rng_untouched():
            items = [dataset[i] for i in range(min(2, len(dataset)))]
    except Exception:  # noqa: BLE001 - the loader reports its own errors with context
        return
    if items:
        collate_problem(items, getattr(loader, 'collate_fn', None), type(dataset).__name__)


def check_grad_clip(state: Preflight) -> None:
    """``optimizer_config.grad_clip`` keys are ``clip_grad_norm_``'s arguments.

    mmcv 1.x passes them as keywords: a typo (``norm_typ``) is torch's
    ``TypeError`` at the first update otherwise.
    """
    grad_clip = getattr(state.runner.optimizer_hook, 'grad_clip', None)
    if not isinstance(grad_clip, dict):
        return
    accepted = [p for p in inspect.signature(clip_grad_norm_).parameters if p != 'parameters']
    for key in grad_clip:
        if key not in accepted:
            raise ConfigError(f"'{key}' is not an argument of torch.nn.utils.clip_grad_norm_."
                              f"{did_you_mean(key, accepted)} Accepted: {', '.join(accepted)}.",
                              key=f'optimizer_config.grad_clip.{key}')
    if 'max_norm' not in grad_clip:
        raise ConfigError('grad_clip needs max_norm, e.g. grad_clip=dict(max_norm=35, '
                          'norm_type=2); grad_clip=None turns clipping off',
                          key='optimizer_config.grad_clip')


def check_val_step(state: Preflight) -> None:
    """A ``('val', N)`` phase calls ``val_step`` on a model that has its own ``train_step``.

    mmcv 1.x's contract: such a model steps itself in both phases, and one
    without ``val_step`` is an ``AttributeError`` at the end of the first
    train phase. A model without ``train_step`` (mtrain's contract) needs no
    ``val_step``: its ``forward`` computes the val losses.
    """
    phases = [times for mode, times in state.workflow if mode == 'val']
    model = unwrap(state.runner.model)
    if not phases or not has_own_steps(model) or callable(getattr(model, 'val_step', None)) \
            or not isinstance(state.runner.batch_processor, BasicBatchProcessor):
        return
    name = type(model).__name__
    raise ConfigError(f"the workflow's ('val', {phases[0]}) phase calls {name}.val_step, but "
                      f'{name} defines train_step and no val_step; add val_step(self, data, '
                      'optimizer=None) returning the losses as train_step does (1.x models '
                      "often return self.train_step(data, optimizer)), or remove ('val', N) "
                      'from workflow (evaluation scores data.val without it)', key='workflow')


#: The checks :func:`run_preflight` runs, in order.
CHECKS: List[Callable[[Preflight], None]] = [
    check_run_length, check_num_classes, check_items_carry_labels, check_grad_clip,
    check_items_collate, check_val_step]
