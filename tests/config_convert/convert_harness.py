"""Run one config's runtime sections in mtrain and in mmengine's Runner; record lr/momentum/wd.

Both sides train the same toy network (Linear → BatchNorm → Linear, so
``paramwise_cfg`` has norm and bias parameters to act on) on the same 64
generated samples, 8 per batch (8 iterations an epoch). A recorder hook reads
every parameter's lr, momentum (Adam: beta1) and weight decay just before each
training iteration, after the schedulers set them.
"""

import copy
import itertools
import logging
from typing import Any, Dict, List, Optional

import torch
from mmengine.config import Config
from mmengine.dataset import DefaultSampler, InfiniteSampler
from mmengine.hooks import Hook as EngineHook
from mmengine.model import BaseModel
from mmengine.runner import Runner
from torch import nn
from torch.utils.data import DataLoader, Dataset

from mtrain.config import check_config
from mtrain.config_convert import for_training
from mtrain.hooks import Hook
from mtrain.registry import DATASETS, MODELS
from mtrain.runner import build_runner

Trace = List[Dict[str, tuple]]
_RUNS = itertools.count()


class CvToyData(Dataset):
    """64 samples; ``nan_at``: the index of one sample made NaN (a non-finite loss there)."""

    def __init__(self, n: int = 64, nan_at: Optional[int] = None) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 4, generator=g)
        self.y = (self.x[:, 0] > 0).long()
        if nan_at is not None:
            self.x[nan_at] = float('nan')

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i):
        return {'img': self.x[i], 'gt_label': self.y[i]}


def _layers(kind: str = 'plain') -> nn.Sequential:
    """``'plain'``: Linear → BN → Linear; ``'paramwise'`` adds a depth-wise conv with a bias
    and a GroupNorm, every kind of parameter the two frameworks' paramwise rules tell apart."""
    torch.manual_seed(0)
    if kind == 'plain':
        return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Unflatten(1, (8, 1, 1)),
                         nn.Conv2d(8, 8, 1, groups=8), nn.GroupNorm(2, 8), nn.Flatten(),
                         nn.Linear(8, 2))


class CvToyNet(nn.Module):
    """mtrain's model contract: forward(img, gt_label) → a dict of losses when training."""

    def __init__(self, kind: str = 'plain') -> None:
        super().__init__()
        self.net = _layers(kind)

    def forward(self, img, gt_label=None):
        logits = self.net(img)
        if self.training:
            return {'loss': nn.functional.cross_entropy(logits, gt_label)}
        return logits.softmax(1)


class EngineToyNet(BaseModel):
    """The same network behind mmengine's BaseModel contract."""

    def __init__(self, kind: str = 'plain') -> None:
        super().__init__()
        self.net = _layers(kind)

    def forward(self, img, gt_label=None, mode='loss'):
        return {'loss': nn.functional.cross_entropy(self.net(img), gt_label)}


MODELS.register_module(name='CvToyNet', module=CvToyNet, force=True)
DATASETS.register_module(name='CvToyData', module=CvToyData, force=True)


def _snapshot(optimizer, names) -> Dict[str, tuple]:
    values = {}
    for group in optimizer.param_groups:
        momentum = group['betas'][0] if 'betas' in group else group.get('momentum', 0.)
        for p in group['params']:
            values[names[id(p)]] = (group['lr'], momentum, group['weight_decay'])
    return values


def _names(model) -> Dict[int, str]:
    return {id(p): n.split('net.', 1)[1] for n, p in model.named_parameters()}


class MtrainRecorder(Hook):
    priority = 'VERY_LOW'

    def __init__(self) -> None:
        self.trace: Trace = []

    def before_train_iter(self, runner) -> None:
        self.trace.append(_snapshot(runner.optimizer, _names(runner.model)))


class EngineRecorder(EngineHook):
    priority = 'VERY_LOW'

    def __init__(self) -> None:
        self.trace: Trace = []

    def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:
        self.trace.append(_snapshot(runner.optim_wrapper.optimizer, _names(runner.model)))


_TOY = dict(model=dict(type='CvToyNet'),
            data=dict(samples_per_gpu=8, workers_per_gpu=0, shuffle=False,
                      train=dict(type='CvToyData')))


class _one_thread:
    """Tiny tensors on a shared 2-core machine: one intra-op thread is 30x faster."""

    def __enter__(self):
        self.threads = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc):
        torch.set_num_threads(self.threads)


def run_mtrain(runtime: Dict[str, Any], work_dir: str, **overrides: Any) -> Trace:
    """mtrain on an mmcv 1.x (or, converted in memory, an mmengine) runtime section.

    ``overrides`` are mtrain (mmcv 1.x) keys set last, e.g. ``resume_from``. A
    ``net`` key picks the network (:func:`_layers`), a ``nan_sample`` key the index of a
    NaN sample (:class:`CvToyData`), on both sides; a ``sampler`` key (mmengine schema) the
    train loader's ``sampler`` settings (``shuffle``, ``seed``), on both sides.
    """
    return train_mtrain(runtime, work_dir, **overrides)[1]


def train_mtrain(runtime: Dict[str, Any], work_dir: str, **overrides: Any):
    """:func:`run_mtrain`, returning ``(the trained runner, the trace)``."""
    with _one_thread():
        return _run_mtrain(runtime, work_dir, overrides)


def _run_mtrain(runtime: Dict[str, Any], work_dir: str, overrides: Dict[str, Any]):
    cfg = copy.deepcopy(runtime)
    model = dict(type='CvToyNet', kind=cfg.pop('net', 'plain'))
    data = dict(type='CvToyData', nan_at=cfg.pop('nan_sample', None))
    sampler = {'type': 'DefaultSampler', 'shuffle': False, **cfg.pop('sampler', {})}
    if 'optim_wrapper' in cfg:  # mmengine schema: what tools/train.py does at load time
        cfg['train_dataloader'] = dict(batch_size=8, num_workers=0, dataset=data,
                                       sampler=sampler)
        cfg = for_training(dict(model=model, **cfg))
    else:
        cfg.update(copy.deepcopy(_TOY), model=model)
        cfg['data']['train'] = data
    cfg.setdefault('log_config', None)
    cfg.update(checkpoint_config=None, nan_policy=None, device='cpu')
    cfg.update(overrides)
    cfg = Config(cfg)
    check_config(cfg)
    # tools/train.py's seed: --seed, else the config's (here never --seed).
    runner, loaders, workflow = build_runner(cfg, work_dir, logging.getLogger('mtrain.cvtest'),
                                             seed=cfg.get('seed', 0))
    recorder = MtrainRecorder()
    runner.register_hook(recorder, 'VERY_LOW')
    runner.run(loaders, workflow)
    return runner, recorder.trace


def run_mmengine(runtime: Dict[str, Any], work_dir: str) -> Trace:
    """mmengine's Runner on ``optim_wrapper``, ``param_scheduler``, ``train_cfg``,
    ``custom_hooks`` and ``auto_scale_lr``."""
    return train_mmengine(runtime, work_dir)[1]


def train_mmengine(runtime: Dict[str, Any], work_dir: str):
    """:func:`run_mmengine`, returning ``(the trained Runner, the trace)``."""
    with _one_thread():
        return _run_mmengine(runtime, work_dir)


def _run_mmengine(runtime: Dict[str, Any], work_dir: str):
    train_cfg = {k: v for k, v in runtime['train_cfg'].items() if k not in ('val_interval',
                                                                          'val_begin')}
    recorder = EngineRecorder()
    data = CvToyData(nan_at=runtime.get('nan_sample'))
    # mmengine's iteration loop sleeps 2 s whenever a finite loader runs out: never let it.
    by_iter = train_cfg.get('type') == 'IterBasedTrainLoop' or not train_cfg.get('by_epoch', True)
    sampling = {'shuffle': False, **runtime.get('sampler', {})}
    sampler = InfiniteSampler(data, **sampling) if by_iter else DefaultSampler(data, **sampling)
    runner = Runner(
        model=EngineToyNet(runtime.get('net', 'plain')), work_dir=work_dir,
        experiment_name=f'cvtest{next(_RUNS)}',
        train_dataloader=DataLoader(data, batch_size=8, sampler=sampler),
        optim_wrapper=copy.deepcopy(runtime['optim_wrapper']),
        param_scheduler=copy.deepcopy(runtime.get('param_scheduler')) or None,
        train_cfg=train_cfg,
        default_hooks={'checkpoint': None, 'logger': None, **runtime.get('default_hooks', {})},
        custom_hooks=[recorder, *copy.deepcopy(runtime.get('custom_hooks', []))],
        auto_scale_lr=copy.deepcopy(runtime.get('auto_scale_lr')),
        default_scope='mmengine', log_level='WARNING')
    runner.train()
    return runner, recorder.trace


def weights(model: nn.Module) -> Dict[str, torch.Tensor]:
    """A model's parameters by their name in :func:`_layers` (either framework's wrapper)."""
    return {n.split('net.', 1)[1]: p.detach().clone() for n, p in model.named_parameters()}


def max_rel_weight_diff(expected: Dict[str, torch.Tensor], actual: Dict[str, torch.Tensor]
                        ) -> float:
    """The largest ``max|a - b| / max|b|`` over the tensors (each tensor on its own scale)."""
    assert expected.keys() == actual.keys(), (expected.keys(), actual.keys())
    return max(float((actual[n] - b).abs().max() / b.abs().max()) for n, b in expected.items())


def assert_same(expected: Trace, actual: Trace, rtol: float = 1e-6) -> None:
    """Every iteration, every parameter: lr, momentum and weight decay equal to ``rtol``."""
    assert len(expected) == len(actual), (len(expected), len(actual))
    for it, (a, b) in enumerate(zip(expected, actual)):
        assert a.keys() == b.keys()
        for name in a:
            for what, x, y in zip(('lr', 'momentum', 'weight_decay'), a[name], b[name]):
                assert abs(x - y) <= rtol * abs(y) + 1e-12, \
                    f'iteration {it}, {name}, {what}: {x} vs {y}'
