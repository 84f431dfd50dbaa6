"""Data loaders from built datasets: per-process batch size, seeded order."""

from typing import Any, Optional

import torch
from torch.utils.data import DataLoader

from ..utils.data_container import CollateWithContainers
from .samplers import DistributedSampler


def build_dataloader(dataset: Any, samples_per_gpu: int, workers_per_gpu: int,
                     shuffle: bool = True, seed: Optional[int] = None, drop_last: bool = False,
                     pin_memory: Optional[bool] = None, persistent_workers: bool = True,
                     prefetch_factor: Optional[int] = None, **kwargs) -> DataLoader:
    """A ``DataLoader`` whose sampler gives this process its share of ``dataset``.

    ``samples_per_gpu`` is the batch size of each process (as in mmcv 1.x), so
    the global batch is ``samples_per_gpu * world_size``. The order depends on
    ``seed`` and the epoch only (see :class:`DistributedSampler`).

    Args:
        dataset: a built dataset.
        samples_per_gpu: batch size per process.
        workers_per_gpu: loader worker processes per process (0: load inline).
        shuffle: shuffle every epoch (train) or keep dataset order (val/test).
        seed: the sampler seed (default 0).
        drop_last: drop the last incomplete batch.
        pin_memory: default: on when CUDA is available.
        persistent_workers: keep workers alive between epochs (when workers > 0).
        prefetch_factor: batches each worker loads ahead (when workers > 0).
        **kwargs: any other ``DataLoader`` argument (e.g. ``collate_fn``).

    Batches are made by PyTorch's ``default_collate``, or, when a dataset's
    samples hold mmcv's ``DataContainer`` fields (1.x pipelines ending in
    ``DefaultFormatBundle`` / ``Collect``), by mmcv's ``collate`` with
    ``samples_per_gpu`` (:class:`~mtrain.utils.data_container.CollateWithContainers`).
    A dataset's own ``collate_fn`` attribute, or the ``collate_fn`` argument, wins.
    """
    for name, value in (('samples_per_gpu', samples_per_gpu), ('workers_per_gpu', workers_per_gpu)):
        if not isinstance(value, int) or value < (1 if name == 'samples_per_gpu' else 0):
            raise ValueError(f'data.{name} must be a {"positive" if name == "samples_per_gpu" else "non-negative"} '
                             f'integer, got {value!r}')
    sampler = DistributedSampler(dataset, shuffle=shuffle, seed=seed or 0, drop_last=drop_last)
    # A generator of the loader's own: otherwise every new epoch iterator draws
    # its worker base seed from the global torch RNG, and a run resumed
    # mid-epoch would continue with a shifted RNG stream (different dropout).
    sampler.loader_generator = kwargs.setdefault('generator', torch.Generator())
    sampler.set_epoch(0)
    if workers_per_gpu > 0:
        kwargs.setdefault('persistent_workers', persistent_workers)
        if prefetch_factor is not None:
            kwargs['prefetch_factor'] = prefetch_factor
    if pin_memory is None:
        pin_memory = torch.cuda.is_available()
    # A dataset whose items need their own batching (one batch per task) brings its collate.
    kwargs.setdefault('collate_fn', getattr(dataset, 'collate_fn', None))
    if kwargs['collate_fn'] is None:
        kwargs['collate_fn'] = CollateWithContainers(samples_per_gpu)
    return DataLoader(dataset, batch_size=samples_per_gpu, sampler=sampler,
                      num_workers=workers_per_gpu, pin_memory=pin_memory,
                      drop_last=drop_last, **kwargs)


def dataset_num_classes(dataset: Any) -> Optional[int]:
    """How many classes ``dataset`` declares, or None when it declares none.

    A dataset declares its class count with a ``num_classes`` attribute, or
    with ``CLASSES`` (the class names, mmcls 0.x's convention), so that a model
    with fewer outputs fails before training instead of at the first loss::

        class MyDataset(torch.utils.data.Dataset):
            CLASSES = ('cat', 'dog')
    """
    count = getattr(dataset, 'num_classes', None)
    if isinstance(count, int) and not isinstance(count, bool):
        return count
    names = getattr(dataset, 'CLASSES', None)
    return len(names) if isinstance(names, (list, tuple)) else None
