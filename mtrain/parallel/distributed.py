"""DistributedDataParallel with the wrapper interface: one process per GPU.

``tools/train.py --launcher pytorch|slurm`` wraps the model in
:class:`MTDistributedDataParallel` (the builder's default when distributed);
the runner and batch processors call the same ``train_step`` / ``val_step`` /
``no_sync`` / ``module`` as on :class:`~mtrain.parallel.ModelWrapper`.
"""

import inspect
from typing import Any, Dict, Optional

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from ..registry import MODEL_WRAPPERS
from ..utils import get_logger
from ..utils.autograd import log_unused_parameters
from ..utils.launch import settle_at_exit
from ..utils.modules import module_device
from .batch_call import call_with_batch, forward_as, has_own_steps
from .scatter_gather import unpack_containers


@MODEL_WRAPPERS.register_module()
class MTDistributedDataParallel(DistributedDataParallel):
    """``torch.nn.parallel.DistributedDataParallel`` plus ``train_step`` & co.

    Every step runs the forward through DDP, so the backward that follows
    averages the gradients over ranks (unless inside ``no_sync()``, which the
    batch processor uses for accumulation micro-steps). The process group must
    exist (``init_dist``) and the module must already be on this process's
    device.

    Assumes every rank calls the same steps in the same order with the same
    parameters taking part, as DDP does. When some parameters take no part in
    a loss (task-specific heads, a branch skipped by a condition) DDP stops
    with an "unused parameters" error at the next step: set
    ``find_unused_parameters=True``, and ``detect_anomalous_params=True`` once
    to see which parameters they are.

    Config::

        model_wrapper = dict(find_unused_parameters=True, broadcast_buffers=False,
                             bucket_cap_mb=25, sync_bn=True)
        find_unused_parameters = True   # the mmdet 2.x top-level key works too

    Args:
        module: the model, on its device.
        find_unused_parameters, broadcast_buffers, bucket_cap_mb,
            gradient_as_bucket_view, static_graph: passed to DDP.
        sync_bn: convert every BatchNorm to ``SyncBatchNorm`` (statistics over
            all ranks' samples). SyncBatchNorm needs CUDA; on the CPU the
            option is ignored with a warning.
        detect_anomalous_params: log the name and shape of every parameter
            not used to compute the loss, at every training step (slow: walks
            the autograd graph; for debugging "unused parameters" errors).
        **ddp_kwargs: any other ``DistributedDataParallel`` argument.

    ``broadcast_buffers=False`` (mmcv's name) stops the buffer broadcast
    before every forward; buffers are still made equal once, at wrapping.
    """

    def __init__(self, module: nn.Module, find_unused_parameters: bool = False,
                 broadcast_buffers: bool = True, bucket_cap_mb: Optional[float] = None,
                 gradient_as_bucket_view: bool = False, static_graph: bool = False,
                 sync_bn: bool = False, detect_anomalous_params: bool = False,
                 **ddp_kwargs: Any) -> None:
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError('MTDistributedDataParallel needs a process group: start with '
                               'tools/dist_train.sh (or --launcher pytorch/slurm), or use '
                               "model_wrapper=dict(type='ModelWrapper') for one process")
        settle_at_exit()  # a group the user started: gloo's threads at exit (see there)
        device = module_device(module)
        if sync_bn:
            module = _to_sync_batchnorm(module, device)
        if not broadcast_buffers:
            ddp_kwargs.update(_no_buffer_broadcast())
        super().__init__(module, device_ids=[device] if device.type == 'cuda' else None,
                         find_unused_parameters=find_unused_parameters,
                         bucket_cap_mb=bucket_cap_mb,
                         gradient_as_bucket_view=gradient_as_bucket_view,
                         static_graph=static_graph, **ddp_kwargs)
        self.detect_anomalous_params = detect_anomalous_params
        self.own_steps = has_own_steps(module)  # mmcv 1.x's contract (see batch_call)

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        """DDP's forward, with mmcv's DataContainers unpacked onto the module's device first."""
        inputs, kwargs = unpack_containers(inputs, kwargs, self.module)
        return super().forward(*inputs, **kwargs)

    def train_step(self, batch: Any, *args: Any, **kwargs: Any) -> Any:
        """Forward ``batch`` through DDP (the next backward syncs gradients).

        A model with its own ``train_step`` (mmcv contract) has it called as
        DDP's forward, with ``(batch, *args, **kwargs)``: DDP then reduces the
        gradients of the ``loss`` it returns. A model that also runs backward
        inside its ``train_step`` (GAN-style) is outside what DDP can reduce:
        wrap its submodules in DDP itself, as mmgen does.
        """
        if self.own_steps:
            with forward_as(self.module, 'train_step'):
                output = self(batch, *args, **kwargs)
        else:
            output = call_with_batch(self, batch)
        if self.detect_anomalous_params:
            log_unused_parameters(output, self.module)
        return output

    def val_step(self, batch: Any, *args: Any, **kwargs: Any) -> Any:
        """Forward ``batch`` through DDP (under no_grad: buffers broadcast, no grad sync)."""
        if self.own_steps:
            with forward_as(self.module, 'val_step'):
                return self(batch, *args, **kwargs)
        return call_with_batch(self, batch)

    def test_step(self, batch: Any) -> Any:
        return call_with_batch(self, batch)  # (through forward: containers unpacked there)


def _no_buffer_broadcast() -> Dict[str, bool]:
    """DDP's argument for "no buffer broadcast at each forward" in the installed torch."""
    if 'forward_sync_buffers' in inspect.signature(DistributedDataParallel.__init__).parameters:
        return {'forward_sync_buffers': False}  # newer torch: broadcast_buffers is deprecated
    return {'broadcast_buffers': False}


def _to_sync_batchnorm(module: nn.Module, device: torch.device) -> nn.Module:
    if device.type != 'cuda':
        get_logger().warning('model_wrapper.sync_bn=True is ignored on the CPU: '
                             'SyncBatchNorm needs CUDA, so BatchNorm statistics stay per process')
        return module
    return nn.SyncBatchNorm.convert_sync_batchnorm(module)
