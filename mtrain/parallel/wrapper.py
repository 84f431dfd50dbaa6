"""The single-process model wrapper: the interface every wrapper offers.

The runner and the batch processors only ever talk to a wrapper:
``train_step(batch)`` / ``val_step(batch)`` / ``test_step(batch)`` run the
forward, ``no_sync()`` suspends gradient synchronisation (a no-op here), and
``module`` is the user's model. :class:`MTDistributedDataParallel` offers the
same methods over ``torch.nn.parallel.DistributedDataParallel``, so no code
path branches on whether a run is distributed.

Every wrapper unpacks mmcv's ``DataContainer`` fields (a 1.x pipeline's
``img``, ``img_metas``, ``gt_semantic_seg``) before the model sees them, as
mmcv's ``MMDataParallel`` does: stacked tensors on the model's device,
``cpu_only`` fields as per-sample lists (:mod:`.scatter_gather`).
"""

from contextlib import nullcontext
from typing import Any, Tuple

from torch import nn
from torch.nn.parallel import DataParallel, DistributedDataParallel

from ..registry import MODEL_WRAPPERS
from .batch_call import call_with_batch, has_own_steps
from .scatter_gather import unpack_containers


@MODEL_WRAPPERS.register_module()
class ModelWrapper(nn.Module):
    """Wrap ``module`` for a single process (CPU or one GPU).

    A model with its own ``train_step`` (mmcv 1.x's contract, see
    :mod:`.batch_call`) gets ``train_step(batch, optimizer, **kwargs)``
    passed on; any other model gets ``forward`` called with the batch.
    """

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module
        #: The user's model follows mmcv 1.x's contract (defines ``train_step``).
        self.own_steps = has_own_steps(module)

    def forward(self, *args, **kwargs) -> Any:
        args, kwargs = self.to_model_inputs(args, kwargs)
        return self.module(*args, **kwargs)

    def to_model_inputs(self, inputs: tuple, kwargs: dict) -> Tuple[tuple, dict]:
        """The arguments the model gets: DataContainers unpacked onto its device."""
        return unpack_containers(inputs, kwargs, self._modules['module'])

    # The steps call the user's model directly: going through this wrapper's own
    # ``__call__`` would add a second module call per step, and ``self.module``
    # a Python-level ``nn.Module.__getattr__``; ``_modules`` is a plain dict.
    def train_step(self, batch: Any, *args: Any, **kwargs: Any) -> Any:
        """Forward ``batch`` in train mode; returns the model's losses.

        mmcv contract: ``module.train_step(batch, *args, **kwargs)`` (args: the optimizer).
        """
        return self._step('train_step', batch, args, kwargs)

    def val_step(self, batch: Any, *args: Any, **kwargs: Any) -> Any:
        """Forward ``batch`` for the val workflow phase / evaluation."""
        return self._step('val_step', batch, args, kwargs)

    def test_step(self, batch: Any) -> Any:
        (batch, ), _ = self.to_model_inputs((batch, ), {})
        return call_with_batch(self._modules['module'], batch)

    def _step(self, step: str, batch: Any, args: tuple, kwargs: dict) -> Any:
        module = self._modules['module']
        (batch, *args), kwargs = self.to_model_inputs((batch, ) + args, kwargs)
        if self.own_steps:
            return getattr(module, step)(batch, *args, **kwargs)
        return call_with_batch(module, batch)

    def no_sync(self):
        """Nothing to synchronise in one process."""
        return nullcontext()


def is_module_wrapper(module: nn.Module) -> bool:
    """Whether ``module`` wraps the user's model in ``.module`` (as mmcv's ``is_module_wrapper``).

    True for every class in the ``MODEL_WRAPPERS`` registry or any of its
    child registries (a 1.x codebase's ``Registry('model wrapper',
    parent=MODULE_WRAPPERS)``), as mmcv 1.7.2, and for torch's
    ``DataParallel`` / ``DistributedDataParallel``.
    """
    return isinstance(module, (DataParallel, DistributedDataParallel)) or _in_registry(
        module, MODEL_WRAPPERS)


def _in_registry(module: nn.Module, registry) -> bool:
    return isinstance(module, tuple(registry.module_dict.values())) or any(
        _in_registry(module, child) for child in registry.children.values())


def unwrap(module: nn.Module) -> nn.Module:
    """The user's model inside any number of wrappers."""
    while is_module_wrapper(module):
        module = module.module
    return module
