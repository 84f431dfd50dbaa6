"""mmcv's wrappers as the route hands them out while mtrain's do not unpack DataContainers.

A 1.x pipeline ends in ``DefaultFormatBundle`` + ``Collect``: the batch holds
``DataContainer``s (stacked images, per-sample ``img_metas``). mmcv's
``MMDataParallel`` / ``MMDistributedDataParallel`` scatter them before calling
the model; these subclasses of mtrain's wrappers do the same with mmcv's own
``scatter_kwargs`` (loaded through the route), then run mtrain's wrapper as
usual. The route uses them only while ``mtrain`` has no ``scatter_kwargs`` of
its own (see :func:`mtrain.compat.mmcv_names.wrapper_home`).
"""

from typing import Any, Dict, Tuple

from ..parallel.mmcv_wrappers import MMDataParallel as _MMDataParallel
from ..parallel.mmcv_wrappers import MMDistributedDataParallel as _MMDDP
from ..utils.modules import module_device


class _Unpacks:
    """Scatter the call's arguments onto the model's device: DataContainers unpacked."""

    def _unpack(self, args: Tuple, kwargs: Dict[str, Any]) -> Tuple[Tuple, Dict[str, Any]]:
        from .mmcv import resolve
        scatter_kwargs = resolve('mmcv.parallel', 'scatter_kwargs')
        device = module_device(self.module)
        targets = [device.index or 0] if device.type == 'cuda' else [-1]
        inputs, kwargs_list = scatter_kwargs(args, kwargs, targets, dim=0)
        return tuple(inputs[0]), dict(kwargs_list[0])

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        args, kwargs = self._unpack(args, kwargs)
        return super().forward(*args, **kwargs)

    def train_step(self, *args: Any, **kwargs: Any) -> Any:
        args, kwargs = self._unpack(args, kwargs)
        return super().train_step(*args, **kwargs)

    def val_step(self, *args: Any, **kwargs: Any) -> Any:
        args, kwargs = self._unpack(args, kwargs)
        return super().val_step(*args, **kwargs)


class MMDataParallel(_Unpacks, _MMDataParallel):
    """mtrain's ``MMDataParallel`` that unpacks DataContainers as mmcv's does."""


class MMDistributedDataParallel(_Unpacks, _MMDDP):
    """mtrain's ``MMDistributedDataParallel`` that unpacks DataContainers as mmcv's does."""
