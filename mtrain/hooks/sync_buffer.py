"""Average the model's buffers over all ranks after each epoch (mmcv 1.x's SyncBuffersHook)."""

from typing import Dict, List

import torch
import torch.distributed as dist

from ..registry import HOOKS
from ..utils import get_dist_info
from .hook import Hook


@HOOKS.register_module()
class SyncBuffersHook(Hook):
    """All-reduce every buffer (BatchNorm ``running_mean``/``running_var``...) to its mean.

    DDP keeps parameters equal on all ranks but each rank's BatchNorm
    statistics follow its own data (with ``broadcast_buffers=False``, or in a
    model DDP does not wrap); averaging them after each epoch makes every
    rank evaluate and save the same model. ``after_epoch`` as in mmcv: after
    every train and val epoch of ``EpochBasedRunner``, once at the end of
    ``IterBasedRunner``. Integer buffers (``num_batches_tracked``) get the
    floor of their mean (mmcv divides them in place, which current PyTorch
    refuses for integers).

    Config::

        custom_hooks = [dict(type='SyncBuffersHook')]

    Args:
        distributed: do nothing when False (mmcv's switch for one-process runs;
            one process has nothing to average either way).
    """

    def __init__(self, distributed: bool = True) -> None:
        self.distributed = distributed

    def after_epoch(self, runner) -> None:
        if self.distributed:
            all_reduce_buffers(list(runner.model.buffers()))


def all_reduce_buffers(buffers: List[torch.Tensor]) -> None:
    """Replace each tensor by its mean over ranks, one all-reduce per dtype and device."""
    world_size = get_dist_info()[1]
    if world_size == 1:
        return
    groups: Dict[tuple, List[torch.Tensor]] = {}
    for buf in buffers:
        groups.setdefault((buf.dtype, buf.device), []).append(buf)
    for (dtype, _), tensors in groups.items():
        flat = torch.cat([t.detach().reshape(-1) for t in tensors])
        dist.all_reduce(flat)
        if dtype.is_floating_point or dtype.is_complex:
            flat.div_(world_size)
        else:
            flat.floor_divide_(world_size)
        offset = 0
        for t in tensors:
            t.data.copy_(flat[offset:offset + t.numel()].view_as(t))
            offset += t.numel()
