"""The benchmark workloads: one model and one in-memory dataset each, run two ways.

``plain_loop`` is what a careful user writes by hand (forward, backward, step,
an LR scheduler stepped every iteration, ``loss.item()`` logged every
``interval`` iterations, ``torch.save`` at the end). ``mtrain_config`` is the
same training as an mtrain config with the default hooks (text logger, iter
timer, NaN guard, checkpoint at the end, LR schedule). Both read the same
dataset through a ``DataLoader`` with the same batch size.
"""

import logging
import os
import os.path as osp
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch import nn
from torch.nn import functional as F

from mtrain.hooks import Hook
from mtrain.registry import DATASETS, HOOKS, MODELS

INTERVAL = 50  # log interval of both loops

# The clock every loop is timed with: process CPU time by default (on a shared
# machine it does not count the time other processes hold the CPU), or the wall
# clock (``--clock wall``, and always on a GPU, after waiting for the GPU to
# finish); see docs/benchmarks.md.
_CLOCKS = {'cpu': time.process_time, 'wall': time.perf_counter}
_clock = [time.process_time]
_device = ['cpu']


def set_clock(name: str, device: str = 'cpu') -> None:
    _device[0] = device
    _clock[0] = _CLOCKS['wall' if device.startswith('cuda') else name]


def clock() -> float:
    if _device[0].startswith('cuda'):
        torch.cuda.synchronize()  # GPU work queued so far counts in the time
    return _clock[0]()


@MODELS.register_module()
class BenchClassifier(nn.Module):
    """``net`` + cross entropy, following mtrain's model contract.

    Args:
        arch: ``'tiny'`` (one 4→10 linear layer: the loops' own cost), ``'mlp'``
            (64→64→10), ``'resnet18'`` or ``'resnet50'`` (torchvision, 10 classes).
    """

    def __init__(self, arch: str = 'mlp') -> None:
        super().__init__()
        torch.manual_seed(0)
        if arch == 'tiny':  # no compute to speak of: what remains is the loops' own cost
            self.net = nn.Linear(4, 10)
        elif arch == 'mlp':
            self.net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
        elif arch in ('resnet18', 'resnet50'):
            # Imported here: only these workloads need torchvision.
            import torchvision.models
            self.net = getattr(torchvision.models, arch)(num_classes=10)
        else:
            raise ValueError(f"arch must be 'tiny', 'mlp', 'resnet18' or 'resnet50', got {arch!r}")

    def forward(self, img: torch.Tensor, gt_label: Optional[torch.Tensor] = None) -> Any:
        logits = self.net(img)
        if gt_label is None:
            return logits
        return {'loss': F.cross_entropy(logits, gt_label)}


@DATASETS.register_module()
class BenchTensorDataset(torch.utils.data.Dataset):
    """``n`` random samples of ``shape`` with labels 0..9 (fixed seed), as dicts."""

    def __init__(self, n: int, shape: List[int]) -> None:
        g = torch.Generator().manual_seed(0)
        self.img = torch.randn(n, *shape, generator=g)
        self.gt_label = torch.randint(0, 10, (n, ), generator=g)

    def __len__(self) -> int:
        return len(self.gt_label)

    def __getitem__(self, i: int) -> Dict[str, torch.Tensor]:
        return {'img': self.img[i], 'gt_label': self.gt_label[i]}


#: name -> (arch, input shape, batch size, batches per epoch)
WORKLOADS = {
    'tiny': ('tiny', [4], 4, 64),
    'mlp': ('mlp', [64], 32, 64),
    'resnet18': ('resnet18', [3, 32, 32], 16, 8),
    'resnet50': ('resnet50', [3, 224, 224], 64, 8),  # for a GPU: bf16 autocast, channels_last
}
#: Workloads trained in bf16 autocast with channels_last, by both loops.
MIXED_PRECISION = ('resnet50', )


def dataset_for(name: str) -> BenchTensorDataset:
    arch, shape, batch, per_epoch = WORKLOADS[name]
    return BenchTensorDataset(batch * per_epoch, shape)


def mtrain_config(name: str, epochs: int) -> Dict[str, Any]:
    """The mtrain config of workload ``name`` for ``epochs`` epochs."""
    arch, shape, batch, per_epoch = WORKLOADS[name]
    dataset = dict(type='BenchTensorDataset', n=batch * per_epoch, shape=shape)
    return dict(
        model=dict(type='BenchClassifier', arch=arch),
        data=dict(samples_per_gpu=batch, workers_per_gpu=0, train=dataset),
        optimizer=dict(type='SGD', lr=0.01, momentum=0.9, weight_decay=1e-4),
        optimizer_config=dict(grad_clip=None),
        lr_config=dict(policy='CosineAnnealing', min_lr=0.0, by_epoch=False),
        runner=dict(type='EpochBasedRunner', max_epochs=epochs),
        checkpoint_config=dict(interval=-1),  # only at the end (save_last)
        log_config=dict(interval=INTERVAL, hooks=[dict(type='TextLoggerHook')]),
        workflow=[('train', 1)],
        device=_device[0],
        **(dict(fp16=dict(dtype='bfloat16'),
                batch_processor=dict(type='BasicBatchProcessor', channels_last=True))
           if name in MIXED_PRECISION else {}))


def bench_logger(path: str) -> logging.Logger:
    """A logger writing to ``path`` only (nothing on the terminal), for both loops."""
    logger = logging.getLogger(f'bench.{path}')
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = logging.FileHandler(path, 'w')
    handler.setFormatter(logging.Formatter('%(asctime)s - %(levelname)s - %(message)s'))
    logger.addHandler(handler)
    return logger


def close_logger(logger: logging.Logger) -> None:
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()


def plain_loop(name: str, epochs: int, work_dir: str,
               on_iter: Optional[Callable[[int], None]] = None, loader: Any = None,
               scheduler: Optional[Callable[[torch.optim.Optimizer, int], Any]] = None) -> float:
    """Train ``name`` by hand for ``epochs`` epochs; returns the seconds it took.

    The timed part starts at the first batch and ends after the final
    ``torch.save``, as ``runner.run`` does on the mtrain side. ``loader``
    (default: a shuffling ``DataLoader`` of the workload's dataset) and
    ``scheduler(optimizer, iterations)`` (default: ``CosineAnnealingLR``,
    stepped every iteration) replace those of the default loop.
    """
    arch, _, batch, per_epoch = WORKLOADS[name]
    device, mixed = torch.device(_device[0]), name in MIXED_PRECISION
    memory_format = torch.channels_last if mixed else torch.contiguous_format
    model = BenchClassifier(arch).to(device, memory_format=memory_format)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    scheduler = (scheduler or torch.optim.lr_scheduler.CosineAnnealingLR)(
        optimizer, epochs * per_epoch)
    loader = loader or torch.utils.data.DataLoader(
        dataset_for(name), batch_size=batch, shuffle=True,
        generator=torch.Generator().manual_seed(0), pin_memory=device.type == 'cuda')
    set_epoch = getattr(loader.sampler, 'set_epoch', None)  # (a sampler that reshuffles by it)
    logger = bench_logger(osp.join(work_dir, 'plain.log'))
    model.train()
    start = clock()
    it = 0
    for epoch in range(epochs):
        if set_epoch is not None:
            set_epoch(epoch)
        for data in loader:
            img = data['img'].to(device, non_blocking=True)
            label = data['gt_label'].to(device, non_blocking=True)
            if mixed:
                with torch.autocast(device.type, dtype=torch.bfloat16):
                    loss = model(img.contiguous(memory_format=memory_format), label)['loss']
            else:
                loss = model(img, label)['loss']
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            it += 1
            if it % INTERVAL == 0:
                logger.info(f'epoch {epoch + 1} iter {it} lr {scheduler.get_last_lr()[0]:.3e} '
                            f'loss {loss.item():.4f}')
            if on_iter is not None:
                on_iter(it)
    torch.save({'state_dict': model.state_dict(), 'optimizer': optimizer.state_dict()},
               osp.join(work_dir, 'plain.pth'))
    elapsed = clock() - start
    close_logger(logger)
    return elapsed


@HOOKS.register_module()
class BenchMarksHook(Hook):
    """Clock readings (and resident memory) after the iterations in ``marks``; ``0``: the start.

    Added by ``overhead.py --long`` and by ``train_py.py`` (``rss=False``: the
    clock only); per iteration it costs one set lookup.
    """

    priority = 'LOWEST'
    #: ``(at_start, at_mark)``: called at ``before_run`` and after each mark when set
    #: (``train_py.py --lockstep`` hands the CPU to the other loop there).
    callbacks: Optional[Tuple[Callable[[], None], Callable[[], None]]] = None

    def __init__(self, marks: List[int], rss: bool = True) -> None:
        self.marks = set(marks)
        self.times: Dict[int, float] = {}
        self.rss: Dict[int, int] = {}
        self.with_rss = rss

    def before_run(self, runner) -> None:
        if self.callbacks is not None:
            self.callbacks[0]()
        self.times[0] = clock()
        if self.with_rss:
            self.rss[0] = rss_bytes()

    def after_train_iter(self, runner) -> None:
        if runner.iter + 1 in self.marks:
            self.times[runner.iter + 1] = clock()
            if self.with_rss:
                self.rss[runner.iter + 1] = rss_bytes()
            if self.callbacks is not None:
                self.callbacks[1]()


def rss_bytes() -> int:
    """This process's resident memory now (Linux), 0 where it cannot be read."""
    try:
        with open('/proc/self/statm') as f:
            return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
    except (OSError, ValueError, IndexError):
        return 0
