"""mmcv 1.x's ``DataContainer`` and ``collate`` (``mmcv.parallel``): batches of unequal samples.

A 1.x pipeline ends in ``DefaultFormatBundle`` + ``Collect``, which wrap each
field of a sample in a :class:`DataContainer` saying how to batch it::

    DataContainer(img, stack=True)                 # padded to one size, stacked
    DataContainer(gt_bboxes)                       # a list of tensors (sizes differ)
    DataContainer(img_meta, cpu_only=True)         # a list of dicts, never moved

:func:`collate` batches such samples (``samples_per_gpu`` at a time) and the
model wrappers unpack the containers before calling the model
(:func:`mtrain.parallel.scatter_kwargs`). mtrain's loaders use this collate
whenever a dataset's samples hold containers (``datasets/builder.py``).

Kept here, below every component, because both the loaders (datasets) and
the wrappers (parallel) need it.
"""

import functools
from collections.abc import Mapping, Sequence
from typing import Any, Callable, List, Optional, Union

import torch
import torch.nn.functional as F
from torch.utils.data.dataloader import default_collate


def _tensor_only(method: Callable) -> Callable:
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if not isinstance(self.data, torch.Tensor):
            raise AttributeError(f'{type(self).__name__} has no attribute {method.__name__} '
                                 f'for type {self.datatype}')
        return method(self, *args, **kwargs)

    return wrapper


class DataContainer:
    """A sample's field with its batching rule.

    Args:
        data: the field (a tensor, an array, a dict, anything).
        stack: pad the samples' tensors to one shape and stack them
            (``cpu_only=False``); otherwise a list of per-sample values.
        padding_value: the value padding fills.
        cpu_only: keep a list of the samples' values, never moved to a device
            (image metas).
        pad_dims: how many trailing dims are padded (1, 2 or 3); None: no
            padding, the shapes must be equal.
    """

    def __init__(self, data: Any, stack: bool = False, padding_value: int = 0,
                 cpu_only: bool = False, pad_dims: Optional[int] = 2) -> None:
        self._data = data
        self._cpu_only = cpu_only
        self._stack = stack
        self._padding_value = padding_value
        assert pad_dims in [None, 1, 2, 3]
        self._pad_dims = pad_dims

    def __repr__(self) -> str:
        return f'{type(self).__name__}({self.data!r})'

    def __len__(self) -> int:
        return len(self._data)

    @property
    def data(self) -> Any:
        return self._data

    @property
    def datatype(self) -> Union[type, str]:
        return self.data.type() if isinstance(self.data, torch.Tensor) else type(self.data)

    @property
    def cpu_only(self) -> bool:
        return self._cpu_only

    @property
    def stack(self) -> bool:
        return self._stack

    @property
    def padding_value(self) -> int:
        return self._padding_value

    @property
    def pad_dims(self) -> Optional[int]:
        return self._pad_dims

    @_tensor_only
    def size(self, *args, **kwargs) -> Any:
        return self.data.size(*args, **kwargs)

    @_tensor_only
    def dim(self) -> int:
        return self.data.dim()


def contains_data_container(obj: Any) -> bool:
    """Whether ``obj`` (a sample or a batch: dicts, lists, tuples) holds a :class:`DataContainer`.

    Asked of every batch and every collated sample list, so plain tensors
    (the usual leaves) are passed over without a call of their own.
    """
    if isinstance(obj, DataContainer):
        return True
    if isinstance(obj, dict):
        obj = obj.values()
    elif not isinstance(obj, (list, tuple)):
        return False
    for item in obj:
        if type(item) is not torch.Tensor and contains_data_container(item):
            return True
    return False


def collate(batch: Sequence, samples_per_gpu: int = 1) -> Any:
    """Batch ``batch`` (a list of samples) as mmcv 1.7.2 does.

    Every ``samples_per_gpu`` consecutive samples make one chunk (one GPU's
    share); a :class:`DataContainer` field becomes a container holding a list
    with one entry per chunk:

    - ``cpu_only``: the chunk's values, as a list;
    - ``stack``: the chunk's tensors, their last ``pad_dims`` dims padded
      (after the data, with ``padding_value``) to the chunk's largest size,
      stacked; the other dims must be equal;
    - otherwise: the chunk's values, as a list.

    Dicts are batched key by key and lists/tuples position by position;
    anything else goes to PyTorch's ``default_collate``. Unlike mmcv, where
    such a field recurses until ``RecursionError``, strings are batched by
    ``default_collate`` (a list of strings).
    """
    if not isinstance(batch, Sequence):
        raise TypeError(f'collate takes a sequence of samples, got {type(batch).__name__}')
    first = batch[0]
    if isinstance(first, DataContainer):
        return _collate_containers(batch, samples_per_gpu)
    if isinstance(first, Sequence) and not isinstance(first, str):
        return [collate(samples, samples_per_gpu) for samples in zip(*batch)]
    if isinstance(first, Mapping):
        return {key: collate([d[key] for d in batch], samples_per_gpu) for key in first}
    return default_collate(batch)


def _chunks(batch: Sequence, size: int) -> List[Sequence]:
    return [batch[i:i + size] for i in range(0, len(batch), size)]


def _collate_containers(batch: Sequence, samples_per_gpu: int) -> DataContainer:
    first = batch[0]
    chunks = _chunks(batch, samples_per_gpu)
    if first.cpu_only:
        stacked = [[sample.data for sample in chunk] for chunk in chunks]
        return DataContainer(stacked, first.stack, first.padding_value, cpu_only=True)
    if first.stack:
        stacked = [_pad_and_stack(chunk) for chunk in chunks]
    else:
        stacked = [[sample.data for sample in chunk] for chunk in chunks]
    return DataContainer(stacked, first.stack, first.padding_value)


def _pad_and_stack(chunk: Sequence[DataContainer]) -> torch.Tensor:
    """One chunk's tensors padded at the end of their last ``pad_dims`` dims, stacked."""
    head = chunk[0]
    assert isinstance(head.data, torch.Tensor), (
        f'[collate] a DataContainer with stack=True must hold a tensor, got {head.datatype}')
    pad_dims = head.pad_dims
    if pad_dims is None:
        return default_collate([sample.data for sample in chunk])
    ndim = head.dim()
    assert ndim > pad_dims, f'[collate] a {ndim}-d tensor cannot be padded in {pad_dims} dims'
    for sample in chunk:
        for d in range(ndim - pad_dims):
            assert head.size(d) == sample.size(d), (
                f'[collate] stacked samples differ in dim {d}: {tuple(head.size())} and '
                f'{tuple(sample.size())} (only the last {pad_dims} dims are padded)')
    largest = [max(sample.size(-d) for sample in chunk) for d in range(1, pad_dims + 1)]
    padded = []
    for sample in chunk:
        pad = [0] * (2 * pad_dims)  # F.pad order: (last dim: before, after), (second last...)
        for d in range(1, pad_dims + 1):
            pad[2 * d - 1] = largest[d - 1] - sample.size(-d)
        padded.append(F.pad(sample.data, pad, value=sample.padding_value))
    return default_collate(padded)


class CollateWithContainers:
    """A loader's ``collate_fn``: mmcv's :func:`collate` for samples that hold containers.

    Samples without any :class:`DataContainer` (mtrain's dicts of tensors) go
    to PyTorch's ``default_collate`` unchanged; the check looks at the first
    sample only, so it costs a few ``isinstance`` calls per batch.

    Args:
        samples_per_gpu: the chunk size of :func:`collate` (the loader's batch size).
    """

    def __init__(self, samples_per_gpu: int) -> None:
        self.samples_per_gpu = samples_per_gpu

    def __call__(self, batch: Sequence) -> Any:
        if batch and contains_data_container(batch[0]):
            return collate(batch, self.samples_per_gpu)
        return default_collate(batch)


__all__ = ['CollateWithContainers', 'DataContainer', 'collate', 'contains_data_container']
