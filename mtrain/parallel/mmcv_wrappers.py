"""mmcv 1.x's wrapper names, for code that builds its wrapper by hand.

``MMDataParallel(model.cuda(), device_ids=[0])`` and
``MMDistributedDataParallel(model.cuda(), device_ids=[torch.cuda.current_device()],
broadcast_buffers=False)`` as written in mmdet 2.x's ``train_detector`` run
as mtrain's :class:`ModelWrapper` and :class:`MTDistributedDataParallel`.
Both pass the optimizer on to a model's own ``train_step`` (mmcv's contract)
and unpack ``DataContainer`` fields before calling the model's ``forward``,
``train_step`` or ``val_step``, as mmcv's do: stacked tensors moved to the
device, ``cpu_only`` fields (``img_metas``) as per-sample lists.
"""

from typing import Any, List, Optional, Sequence, Tuple

import torch
from torch import nn

from ..registry import MODEL_WRAPPERS
from ..utils.modules import module_device
from .distributed import MTDistributedDataParallel
from .scatter_gather import device_ids_of, scatter_kwargs, unpack_to
from .wrapper import ModelWrapper


@MODEL_WRAPPERS.register_module()
class MMDataParallel(ModelWrapper):
    """mmcv's single-process wrapper: one device, no scatter across GPUs.

    Args:
        module: the model.
        device_ids: at most one GPU id; the model is moved there. mmcv's
            multi-GPU ``DataParallel`` is not offered: run one process per
            GPU with ``MMDistributedDataParallel`` (tools/dist_train.sh).
        dim: the dimension :meth:`scatter` splits tensors along.
        output_device: accepted for mmcv's signature; unused.

    Like mmcv's, it scatters every call's arguments to its device (the
    first of ``device_ids``; without any, the model's own, ``[-1]`` meaning
    the CPU): DataContainers unpacked, plain tensors moved there too. Without
    CUDA ``device_ids`` is emptied, as in PyTorch's ``DataParallel``.
    """

    def __init__(self, module: nn.Module, device_ids: Optional[Sequence[int]] = None,
                 dim: int = 0, output_device: Any = None) -> None:
        device_ids = list(device_ids or [])
        if len(device_ids) > 1:
            raise ValueError(f'MMDataParallel got device_ids={device_ids}: mtrain drives one GPU '
                             'per process; train on several GPUs with tools/dist_train.sh '
                             '(MMDistributedDataParallel)')
        if not torch.cuda.is_available():
            device_ids = []
        if device_ids:
            module = module.cuda(device_ids[0])
        super().__init__(module)
        self.device_ids = device_ids
        self.dim = dim

    def scatter(self, inputs: Any, kwargs: Any, device_ids: List[int]) -> Tuple[tuple, tuple]:
        """mmcv's: one ``(inputs, kwargs)`` per device, DataContainers unpacked."""
        return scatter_kwargs(inputs, kwargs, device_ids, dim=self.dim)

    def to_model_inputs(self, inputs: tuple, kwargs: dict) -> Tuple[tuple, dict]:
        targets = self.device_ids or device_ids_of(self._modules['module'])
        return unpack_to(inputs, kwargs, targets)


@MODEL_WRAPPERS.register_module()
class MMDistributedDataParallel(MTDistributedDataParallel):
    """mmcv's DDP wrapper name; ``device_ids`` / ``output_device`` may be given as in mmcv.

    The device is the module's own (it must already be there, as DDP
    requires); ``device_ids`` naming another device is an error.
    DataContainers are unpacked onto that device before DDP's forward (also
    on the CPU, where mmcv's passed them on packed).
    """

    def __init__(self, module: nn.Module, device_ids: Optional[Sequence[int]] = None,
                 output_device: Any = None, **kwargs: Any) -> None:
        device = module_device(module)
        if device_ids and (device.type != 'cuda' or list(device_ids) != [device.index]):
            raise ValueError(f'MMDistributedDataParallel got device_ids={list(device_ids)} but '
                             f'the model is on {device}; move it first (model.cuda()) or '
                             'leave device_ids out')
        super().__init__(module, **kwargs)

    def scatter(self, inputs: Any, kwargs: Any, device_ids: List[int]) -> Tuple[tuple, tuple]:
        """mmcv's: one ``(inputs, kwargs)`` per device, DataContainers unpacked."""
        return scatter_kwargs(inputs, kwargs, device_ids, dim=self.dim)

    def to_kwargs(self, inputs: Any, kwargs: Any, device_id: int) -> Tuple[tuple, tuple]:
        """mmcv's: ``(inputs, kwargs)`` scattered to ``device_id`` alone."""
        return scatter_kwargs(inputs, kwargs, [device_id], dim=self.dim)
