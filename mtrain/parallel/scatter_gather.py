"""mmcv 1.x's ``scatter`` / ``scatter_kwargs``: batches of DataContainers to model arguments.

``scatter(inputs, target_gpus)`` returns one copy of ``inputs`` per target
GPU (``[-1]``: the CPU), with

- a tensor split along ``dim`` into one chunk per GPU, each moved there
  (on the CPU: left as it is);
- a :class:`~mtrain.utils.data_container.DataContainer` unpacked: its
  per-chunk entries (stacked tensors, or lists of tensors) moved to their GPU,
  a ``cpu_only`` container's lists of values left as they are;
- dicts, lists and tuples scattered element by element; anything else
  (numbers, strings, optimizers) repeated for each GPU.

mtrain runs one device per process, so the wrappers call it with one target
and take the first copy (:func:`unpack_containers`).
"""

from typing import Any, Dict, List, Sequence, Tuple

import torch
from torch import Tensor, nn

from ..utils.data_container import DataContainer, contains_data_container
from ..utils.modules import module_device


def _to_device(tensor: Tensor, gpu: int) -> Tensor:
    # (mmcv also made it contiguous, for its copy kernels: same values; mtrain keeps the
    # memory format, e.g. channels_last)
    return tensor if gpu == -1 else tensor.to(torch.device('cuda', gpu), non_blocking=True)


def _split(tensor: Tensor, target_gpus: Sequence[int], dim: int) -> tuple:
    """One chunk of ``tensor`` per GPU (fewer when it has fewer rows), each on its GPU."""
    if len(target_gpus) == 1:
        return (_to_device(tensor, target_gpus[0]), )
    return tuple(_to_device(chunk, gpu)
                 for chunk, gpu in zip(tensor.chunk(len(target_gpus), dim), target_gpus))


def _container_entries(entries: List[Any], target_gpus: Sequence[int]) -> tuple:
    """A container's per-chunk entries, chunk ``i`` on GPU ``i // chunk_size``."""
    chunk_size = (len(entries) - 1) // len(target_gpus) + 1
    return tuple(_move_entry(entry, target_gpus[i // chunk_size])
                 for i, entry in enumerate(entries))


def _move_entry(entry: Any, gpu: int) -> Any:
    if isinstance(entry, Tensor):
        return _to_device(entry, gpu)
    if isinstance(entry, list):
        return [_move_entry(item, gpu) for item in entry]
    raise TypeError(f'a DataContainer with cpu_only=False must hold tensors (or lists of '
                    f'them) to move to the device, got {type(entry).__name__}; wrap it with '
                    'cpu_only=True to pass it on as it is')


def scatter(inputs: Any, target_gpus: Sequence[int], dim: int = 0) -> list:
    """``inputs`` once per target GPU (``[-1]``: the CPU), DataContainers unpacked (see above)."""
    def scatter_map(obj: Any) -> Any:
        if isinstance(obj, Tensor):
            return _split(obj, target_gpus, dim)
        if isinstance(obj, DataContainer):
            return obj.data if obj.cpu_only else _container_entries(obj.data, target_gpus)
        if isinstance(obj, tuple) and obj:
            return list(zip(*map(scatter_map, obj)))
        if isinstance(obj, list) and obj:
            return [list(item) for item in zip(*map(scatter_map, obj))]
        if isinstance(obj, dict) and obj:
            return [type(obj)(item) for item in zip(*map(scatter_map, obj.items()))]
        return [obj for _ in target_gpus]

    try:
        return scatter_map(inputs)
    finally:
        scatter_map = None  # break the closure's reference cycle (it is recursive)


def scatter_kwargs(inputs: Any, kwargs: Any, target_gpus: Sequence[int],
                   dim: int = 0) -> Tuple[tuple, tuple]:
    """:func:`scatter` of positional and keyword arguments, padded to the same count."""
    inputs = scatter(inputs, target_gpus, dim) if inputs else []
    kwargs = scatter(kwargs, target_gpus, dim) if kwargs else []
    inputs, kwargs = list(inputs), list(kwargs)
    inputs += [() for _ in range(len(kwargs) - len(inputs))]
    kwargs += [{} for _ in range(len(inputs) - len(kwargs))]
    return tuple(inputs), tuple(kwargs)


def device_ids_of(module: nn.Module) -> List[int]:
    """``[gpu index]`` of ``module``'s device, or ``[-1]`` on the CPU (scatter's targets)."""
    device = module_device(module)
    if device.type != 'cuda':
        return [-1]
    return [torch.cuda.current_device() if device.index is None else device.index]


def unpack_to(inputs: tuple, kwargs: Dict[str, Any],
              device_ids: Sequence[int]) -> Tuple[tuple, Dict[str, Any]]:
    """The model's arguments on ``device_ids[0]``: mmcv's scatter, first copy."""
    inputs, kwargs = scatter_kwargs(inputs, kwargs, device_ids[:1])
    if not inputs:  # no arguments at all
        return (), {}
    return tuple(inputs[0]), dict(kwargs[0])


def unpack_containers(inputs: tuple, kwargs: Dict[str, Any],
                      module: nn.Module) -> Tuple[tuple, Dict[str, Any]]:
    """``(inputs, kwargs)`` with DataContainers unpacked onto ``module``'s device.

    Arguments without any container are returned as they are (mtrain's own
    batches: a few ``isinstance`` checks), so this is cheap on every step.
    """
    for item in inputs:  # (the arguments themselves: no call for the tuple, none per tensor)
        if type(item) is not Tensor and contains_data_container(item):
            return unpack_to(inputs, kwargs, device_ids_of(module))
    if kwargs and contains_data_container(kwargs):
        return unpack_to(inputs, kwargs, device_ids_of(module))
    return inputs, kwargs
