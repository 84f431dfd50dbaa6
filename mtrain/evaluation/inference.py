"""Inference over a loader with mmcv 1.x's evaluation contract.

The contract (mmdet 2.x / mmseg 0.x / mmcls 0.x models): the model's
``forward`` takes ``return_loss``; in test mode it is called as
``model(return_loss=False, **data)`` and returns a list with one result per
sample (any Python objects: a list of per-class arrays, a dict, a mask).
The per-sample results are gathered in dataset order and the dataset scores
them with ``dataset.evaluate(results, logger=..., **eval_kwargs)``.

Which contract a model follows is decided by one rule, :func:`uses_mmcv_contract`:
a ``forward`` with a ``return_loss`` parameter (or ``**kwargs`` on a model with
``train_step``) is an mmcv 1.x model; any other
model follows mtrain's contract (its eval output is one tensor of predictions
per batch, concatenated; see :class:`mtrain.hooks.EvalHook`).
"""

import inspect
from typing import Any, Dict, List, Optional

import torch
from torch import nn
from torch.utils._pytree import tree_map

from ..utils import get_dist_info
from ..utils.modules import module_device
from .collect import collect_results_cpu, collect_results_gpu


def unwrap(model: nn.Module) -> nn.Module:
    """The user's model inside a wrapper (mtrain's, DDP, mmcv's MMDataParallel)."""
    return getattr(model, 'module', model)


def uses_mmcv_contract(model: nn.Module) -> bool:
    """Whether ``model`` (or the model a wrapper holds) is evaluated the mmcv 1.x way.

    The rule: its ``forward`` has a ``return_loss`` parameter, as every
    mmdet 2.x / mmseg 0.x / mmcls 0.x model's ``BaseDetector.forward(img,
    img_metas, return_loss=True, **kwargs)`` and the like do; or the model
    has mmcv's ``train_step`` and its ``forward`` takes ``**kwargs``, through
    which 1.x models read ``return_loss`` (mmcv always calls
    ``model(return_loss=False, **data)`` in test mode).
    """
    module = unwrap(model)
    params = inspect.signature(module.forward).parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    return 'return_loss' in params or (takes_any and callable(getattr(module, 'train_step', None)))


def eval_forward_kwargs(model: nn.Module) -> Dict[str, Any]:
    """The keyword arguments of an mmcv-contract test forward.

    ``return_loss=False``, and ``rescale=True`` where the model's
    ``simple_test`` (or ``forward``) names a ``rescale`` parameter: mmdet's
    detectors default it to False and mmdet's test functions pass True (boxes
    in the original image's scale); mmcls's classifiers have no such
    parameter and would reject it.
    """
    module = unwrap(model)
    kwargs: Dict[str, Any] = {'return_loss': False}
    for method in (getattr(module, 'simple_test', None), module.forward):
        if method is not None and 'rescale' in inspect.signature(method).parameters:
            kwargs['rescale'] = True
            break
    return kwargs


def _to(batch: Any, device: torch.device) -> Any:
    return tree_map(lambda x: x.to(device, non_blocking=True) if isinstance(x, torch.Tensor)
                    else x, batch)


def _to_cpu(result: Any) -> Any:
    """A per-sample result with its tensors moved off the device (numpy arrays stay)."""
    return tree_map(lambda x: x.detach().cpu() if isinstance(x, torch.Tensor) else x, result)


@torch.no_grad()
def single_gpu_test(model: nn.Module, data_loader: Any) -> List[Any]:
    """Every batch's per-sample results, in loader order (mmcv's ``single_gpu_test``).

    ``model`` is called as ``model(return_loss=False, **data)`` (``rescale=True``
    too, see :func:`eval_forward_kwargs`) with the batch on the model's device; each
    result is moved to the CPU as it comes, so the val set's predictions never
    pile up on the device.
    """
    model.eval()
    kwargs, device = eval_forward_kwargs(model), module_device(model)
    results: List[Any] = []
    for data in data_loader:
        results.extend(_to_cpu(model(**kwargs, **_to(data, device))))
    return results


def multi_gpu_test(model: nn.Module, data_loader: Any, tmpdir: Optional[str] = None,
                   gpu_collect: bool = False) -> Optional[List[Any]]:
    """:func:`single_gpu_test` on this rank's share, gathered on rank 0 (mmcv's ``multi_gpu_test``).

    Args:
        model: the (wrapped) model.
        data_loader: a loader over ``DistributedSampler(shuffle=False)``.
        tmpdir: folder on a shared filesystem for ``gpu_collect=False``.
        gpu_collect: gather through the process group instead of files.

    Returns:
        The whole dataset's results on rank 0; None on the other ranks.
    """
    part = single_gpu_test(model, data_loader)
    return gather(part, len(data_loader.dataset), tmpdir, gpu_collect)


def gather(part: Any, size: int, tmpdir: Optional[str], gpu_collect: bool) -> Optional[Any]:
    """This rank's results joined with the others' on rank 0 (the whole list in one process)."""
    if get_dist_info()[1] > 1 and gpu_collect:
        return collect_results_gpu(part, size)
    return collect_results_cpu(part, size, tmpdir)
