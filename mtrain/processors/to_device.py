"""Moving nested batches to a device and counting their samples."""

from typing import Any

import torch

from ..utils.data_container import DataContainer


def to_device(batch: Any, device: torch.device) -> Any:
    """Move every tensor in a nested dict/list/tuple to ``device`` (non-blocking).

    mmcv's ``DataContainer`` fields are left packed: the model wrapper unpacks
    them onto the model's device (mmcv's scatter), keeping ``cpu_only`` ones.
    """
    if isinstance(batch, torch.Tensor):
        # Comparing devices costs a quarter of a no-op ``.to()`` call (CPU runs, GPU datasets).
        return batch if batch.device == device else batch.to(device, non_blocking=True)
    if isinstance(batch, dict):  # the usual batch: a dict of tensors, one call for it all
        for v in batch.values():
            if not isinstance(v, torch.Tensor) or v.device != device:
                break
        else:
            return batch  # already there (a CPU run, a dataset on the GPU): no new dict
        return {k: (v if v.device == device else v.to(device, non_blocking=True))
                if isinstance(v, torch.Tensor) else to_device(v, device)
                for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, '_fields'):  # namedtuple
        return type(batch)(*(to_device(v, device) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(v, device) for v in batch)
    return batch


def batch_size(batch: Any) -> int:
    """The leading dimension of the first tensor found in ``batch`` (1 if none)."""
    if isinstance(batch, dict):  # the usual batch: its first value is a tensor
        for value in batch.values():
            if isinstance(value, torch.Tensor):
                return value.shape[0] if value.dim() else 1
            break
    n = _leading_dim(batch)
    return 1 if n is None else n


def _leading_dim(batch: Any):
    if isinstance(batch, torch.Tensor):
        return batch.shape[0] if batch.dim() else 1  # (len() goes through Python code)
    if isinstance(batch, DataContainer):  # collated: one entry per chunk, the first is ours
        first = batch.data[0] if batch.data else None
        return _leading_dim(first) if isinstance(first, torch.Tensor) else len(first or ())
    if isinstance(batch, dict):
        batch = list(batch.values())
    if isinstance(batch, (list, tuple)):
        for item in batch:
            n = _leading_dim(item)
            if n is not None:
                return n
    return None
