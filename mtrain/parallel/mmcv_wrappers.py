"""mmcv 1.x's wrapper names, for code that builds its wrapper by hand.

``MMDataParallel(model.cuda(), device_ids=[0])`` and
``MMDistributedDataParallel(model.cuda(), device_ids=[torch.cuda.current_device()],
broadcast_buffers=False)`` as written in mmdet 2.x's ``train_detector`` run
as mtrain's :class:`ModelWrapper` and :class:`MTDistributedDataParallel`.
Both pass the optimizer on to a model's own ``train_step`` (mmcv's contract).
"""

from typing import Any, Optional, Sequence

import torch
from torch import nn

from ..registry import MODEL_WRAPPERS
from ..utils.modules import module_device
from .distributed import MTDistributedDataParallel
from .wrapper import ModelWrapper


@MODEL_WRAPPERS.register_module()
class MMDataParallel(ModelWrapper):
    """mmcv's single-process wrapper: one device, no scatter across GPUs.

    Args:
        module: the model.
        device_ids: at most one GPU id; the model is moved there. mmcv's
            multi-GPU ``DataParallel`` is not offered: run one process per
            GPU with ``MMDistributedDataParallel`` (tools/dist_train.sh).
        dim, output_device: accepted for mmcv's signature; unused.
    """

    def __init__(self, module: nn.Module, device_ids: Optional[Sequence[int]] = None,
                 dim: int = 0, output_device: Any = None) -> None:
        device_ids = list(device_ids or [])
        if len(device_ids) > 1:
            raise ValueError(f'MMDataParallel got device_ids={device_ids}: mtrain drives one GPU '
                             'per process; train on several GPUs with tools/dist_train.sh '
                             '(MMDistributedDataParallel)')
        if device_ids and torch.cuda.is_available():
            module = module.cuda(device_ids[0])
        super().__init__(module)
        self.device_ids = device_ids


@MODEL_WRAPPERS.register_module()
class MMDistributedDataParallel(MTDistributedDataParallel):
    """mmcv's DDP wrapper name; ``device_ids`` / ``output_device`` may be given as in mmcv.

    The device is the module's own (it must already be there, as DDP
    requires); ``device_ids`` naming another device is an error.
    """

    def __init__(self, module: nn.Module, device_ids: Optional[Sequence[int]] = None,
                 output_device: Any = None, **kwargs: Any) -> None:
        device = module_device(module)
        if device_ids and (device.type != 'cuda' or list(device_ids) != [device.index]):
            raise ValueError(f'MMDistributedDataParallel got device_ids={list(device_ids)} but '
                             f'the model is on {device}; move it first (model.cuda()) or '
                             'leave device_ids out')
        super().__init__(module, **kwargs)
