"""Fully sharded data parallel (PyTorch's FSDP2, ``fully_shard``) with the wrapper interface.

For a model whose parameters, gradients and optimizer state do not fit on one
GPU next to its activations: each rank keeps 1/N of them and gathers a
layer's parameters only while that layer runs.

Config::

    model_wrapper = dict(type='MTFullyShardedDataParallel',
                         shard_layers=['TransformerBlock'])   # class names sharded one by one
"""

from contextlib import contextmanager
from typing import Any, Dict, Iterator, Sequence

import torch
import torch.distributed as dist
from torch import nn

from ..registry import MODEL_WRAPPERS
from ..utils.launch import settle_at_exit
from .batch_call import call_with_batch, forward_as, has_own_steps
from .scatter_gather import unpack_containers


@MODEL_WRAPPERS.register_module()
class MTFullyShardedDataParallel(nn.Module):
    """Shard ``module`` over all ranks with ``torch.distributed.fsdp.fully_shard``.

    Each layer whose class name is in ``shard_layers`` becomes its own shard
    unit (its parameters are gathered just before it runs and freed after),
    then the whole model is one more unit for whatever is left. Checkpoints
    are sharded by default (each rank writes its part, no rank gathers the
    whole: :mod:`mtrain.runner.sharded_writes`); with
    ``checkpoint_config.sharded=False`` they hold the whole, unsharded model
    and full optimizer state (gathered on every rank, written by rank 0, by
    the methods below). Either loads into any run of the same model; an
    optimizer state written under FSDP is keyed by parameter name.

    Assumes rank 0's freshly built model is the one to train: its weights
    are broadcast before sharding, so the whole model must fit in one
    process's memory once, at build time. ``no_sync()`` (accumulation)
    is supported.

    Args:
        module: the model, on this process's device.
        shard_layers: class names of the submodules to shard one by one.
        reshard_after_forward: free gathered parameters after each forward
            (less memory, one more all-gather in backward).
    """

    #: Gathering the weights for a checkpoint is a collective: every rank takes part.
    collective_checkpoint = True

    def __init__(self, module: nn.Module, shard_layers: Sequence[str] = (),
                 reshard_after_forward: bool = True) -> None:
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError('MTFullyShardedDataParallel needs a process group: start with '
                               'tools/dist_train.sh (or --launcher pytorch/slurm)')
        # Lazy: importing FSDP costs about a second, paid only by runs that use it.
        from torch.distributed.device_mesh import init_device_mesh
        try:
            from torch.distributed.fsdp import fully_shard
        except ImportError as e:  # FSDP2's public entry point arrived in torch 2.6
            raise RuntimeError(f'MTFullyShardedDataParallel needs torch >= 2.6 (fully_shard); '
                               f'this is torch {torch.__version__}. Upgrade torch, or use '
                               "model_wrapper=dict(type='MTDistributedDataParallel')") from e
        super().__init__()
        settle_at_exit()  # a group the user started: gloo's threads at exit (see there)
        device = next(module.parameters()).device
        for tensor in module.state_dict().values():
            dist.broadcast(tensor, src=0)  # the same initial model on every rank
        mesh = init_device_mesh(device.type, (dist.get_world_size(), ))
        unknown = set(shard_layers) - {type(m).__name__ for m in module.modules()}
        if unknown:
            raise ValueError(f'model_wrapper.shard_layers names {sorted(unknown)}, which are not '
                             f'classes of modules in {type(module).__name__}')
        for sub in module.modules():
            if sub is not module and type(sub).__name__ in shard_layers:
                fully_shard(sub, mesh=mesh, reshard_after_forward=reshard_after_forward)
        fully_shard(module, mesh=mesh, reshard_after_forward=reshard_after_forward)
        self.module = module
        self.own_steps = has_own_steps(module)  # mmcv 1.x's contract (see batch_call)
        self._sync = True

    def forward(self, *args, **kwargs) -> Any:
        args, kwargs = unpack_containers(args, kwargs, self.module)  # mmcv's DataContainers
        return self.module(*args, **kwargs)

    def train_step(self, batch: Any, *args: Any, **kwargs: Any) -> Any:
        # Decided at the forward, as in DDP: the backward of a step run inside
        # no_sync() keeps its gradients local (unsharded) until a synced one.
        self.module.set_requires_gradient_sync(self._sync)
        return self._step('train_step', batch, args, kwargs)

    def val_step(self, batch: Any, *args: Any, **kwargs: Any) -> Any:
        return self._step('val_step', batch, args, kwargs)

    def _step(self, step: str, batch: Any, args: tuple, kwargs: dict) -> Any:
        if self.own_steps:  # the model's own step runs as the sharded module's forward
            (batch, *args), kwargs = unpack_containers((batch, ) + args, kwargs, self.module)
            with forward_as(self.module, step):
                return self.module(batch, *args, **kwargs)
        return call_with_batch(self, batch)

    def test_step(self, batch: Any) -> Any:
        return call_with_batch(self, batch)

    @contextmanager
    def no_sync(self) -> Iterator[None]:
        """Steps run inside accumulate gradients locally without reducing them."""
        self._sync = False
        try:
            yield
        finally:
            self._sync = True

    # -- checkpoints: every rank calls these (collectives) ---------------------
    def checkpoint_state_dict(self) -> Dict[str, torch.Tensor]:
        """The whole model's weights on rank 0 (CPU); an empty dict elsewhere."""
        dcp = _dcp_state_dict()
        return dcp.get_model_state_dict(self.module, options=_full_on_rank0(dcp))

    def load_checkpoint_state_dict(self, state: Dict[str, torch.Tensor], strict: bool = True):
        """Shard whole-model weights into this rank's parameters (missing/unexpected keys)."""
        dcp = _dcp_state_dict()
        return dcp.set_model_state_dict(
            self.module, state, options=dcp.StateDictOptions(full_state_dict=True, strict=strict))

    def optimizer_state_dict(self, optimizer: torch.optim.Optimizer) -> Dict[str, Any]:
        """The full optimizer state keyed by parameter name, on rank 0."""
        dcp = _dcp_state_dict()
        return dcp.get_optimizer_state_dict(self.module, optimizer, options=_full_on_rank0(dcp))

    def load_optimizer_state_dict(self, optimizer: torch.optim.Optimizer,
                                  state: Dict[str, Any]) -> None:
        """Shard a full optimizer state (as saved above) into ``optimizer``."""
        dcp = _dcp_state_dict()
        dcp.set_optimizer_state_dict(self.module, optimizer, state,
                                     options=dcp.StateDictOptions(full_state_dict=True))


def _dcp_state_dict():
    # Lazy, like FSDP itself (see MTFullyShardedDataParallel.__init__).
    from torch.distributed.checkpoint import state_dict
    return state_dict


def _full_on_rank0(dcp) -> Any:
    """Gathered on every rank, kept (on the CPU) by rank 0 only: what a checkpoint holds."""
    return dcp.StateDictOptions(full_state_dict=True, cpu_offload=True)
