"""A batch as micro-batches with the whole batch's gradients: exact out-of-memory recovery.

With ``optimizer_config=dict(..., micro_batch='auto')`` the batch processors
train through :func:`train_in_micro_batches`: the batch runs whole until it
runs out of device memory; then everything the attempt changed is put back
(``step/micro_batch.py``), the micro-batch size is halved on every rank, and
the same samples run again as micro-batches, each forward followed by its
backward, each loss weighted by its share of the batch's samples, so that
the gradients add up to the whole batch's (for a loss that is a mean over the
batch's samples, mmcv's and mmengine's convention). The optimizer hook then
steps once. BatchNorm normalises each micro-batch with its own statistics and
updates its running statistics once per micro-batch.
"""

from contextlib import nullcontext
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from ..step.micro_batch import (Attempt, OutOfMemoryStop, error_line, average_gradients,
                                is_out_of_memory, trainable_params)
from ..utils import ConfigError, get_dist_info
from ..utils.data_container import DataContainer
from .to_device import batch_size

#: ``(runner, micro-batch) -> (loss to back-propagate, log_vars)``: the processor's forward.
Forward = Callable[[Any, Any], Tuple[torch.Tensor, Dict[str, Any]]]
KEY = 'optimizer_config.micro_batch'


def train_in_micro_batches(processor, runner, batch: Any, forward: Forward, divisor: int = 1,
                           first: bool = True,
                           final: bool = True) -> Tuple[torch.Tensor, Dict[str, Any], int]:
    """Forward and backward ``batch`` in micro-batches of the run's size; retry smaller on OOM.

    Every rank calls it for every batch (one agreement after each attempt,
    a collective under DDP); each micro-batch runs in ``no_sync()`` and,
    when ``final`` and the iteration ends a window, the gradients are
    averaged over the ranks once all have succeeded. ``divisor`` divides
    every loss (MultiBatchProcessor's ``'mean'``); ``first`` / ``final``:
    the batch is the iteration's first / last (MultiBatchProcessor's tuples).

    Returns ``(loss, log_vars, num_samples)``: the batch's loss (detached,
    divided by ``divisor``) and log values, each the samples-weighted mean
    over the micro-batches. Unsplit, the loss is back-propagated as it is
    (÷ ``divisor``): the same operations as without ``micro_batch``.
    """
    step, module = runner.optim_step, runner.model_wrapper.module
    sizes, samples = step.micro_batch, batch_size(batch)
    params = trainable_params(module, runner.optimizer)
    distributed = get_dist_info()[1] > 1
    first_size = sizes.for_batch(samples)
    while True:
        size = sizes.for_batch(samples)
        attempt = Attempt(module, params, step.losses)
        if distributed and first and runner.iter % step.cumulative_iters == 0:
            _broadcast_buffers_at_next_forward(runner.model_wrapper)
        error = None
        try:
            result = _attempt(processor, runner, split_batch(batch, size), samples, forward,
                              divisor, distributed)
        except RuntimeError as e:
            if not is_out_of_memory(e):
                raise
            error, result = error_line(e), None  # (leaving the except frees its activations)
        out_of_memory, halved = sizes.agree(error is not None, size)
        if not out_of_memory:
            attempt.commit()
            break
        attempt.rollback()
        _free(runner.device)
        if not sizes.auto or halved < 1:
            raise OutOfMemoryStop(_last_line(sizes, size, samples, error, runner.iter))
        sizes.size = halved
    if final and distributed and step.ends_window(runner.iter):
        average_gradients(params)
    if size != first_size:
        _log_new_size(runner, module, samples, size)
    return result


def _broadcast_buffers_at_next_forward(wrapper: Any) -> None:
    """DDP's buffer broadcast (``broadcast_buffers=True``) at the forward that begins a window.

    DDP broadcasts rank 0's buffers at the first forward after a synced one,
    i.e. at the start of every window; micro-batches all run in
    ``no_sync()``, so DDP's flag for it is set again here, at each attempt:
    the rollback restored this rank's own buffers, and a forward that ran
    out of memory never reached DDP's post-forward, which clears the flag,
    so the ranks' flags differ until set again (a broadcast on one rank
    alone hangs the job: the 2-rank test does, without this line).
    """
    if hasattr(wrapper, 'require_forward_param_sync'):
        wrapper.require_forward_param_sync = True


def _attempt(processor, runner, parts: List[Tuple[Any, int]], samples: int, forward: Forward,
             divisor: int, distributed: bool) -> Tuple[torch.Tensor, Dict[str, Any], int]:
    """One try: each micro-batch's forward then backward; the weighted loss and log values."""
    total, logged = None, []
    for part, count in parts:
        share = count / samples
        with runner.model_wrapper.no_sync() if distributed else nullcontext():
            loss, log_vars = forward(runner, part)
            loss = _weighted(loss, share, divisor)
            processor.backward(runner, loss)
        loss = loss.detach()
        total = loss if total is None else total + loss
        logged.append((log_vars, share))
    if len(logged) == 1:
        return total, logged[0][0], samples
    keys = dict.fromkeys(k for log_vars, _ in logged for k in log_vars)
    return total, {k: sum(lv[k] * share for lv, share in logged if k in lv) for k in keys}, samples


def _weighted(loss: torch.Tensor, share: float, divisor: int) -> torch.Tensor:
    """``loss`` × its share of the batch's samples, ÷ ``divisor`` (each only when not 1)."""
    if share != 1:
        loss = loss * share
    return loss if divisor == 1 else loss / divisor


def _free(device: torch.device) -> None:
    """Give the failed attempt's cached blocks back to the device (CUDA's caching allocator)."""
    if device.type == 'cuda':
        torch.cuda.empty_cache()


def _last_line(sizes, size: int, samples: int, error: Optional[str], iteration: int) -> str:
    where = f'({error})' if error else '(on another rank)'
    if not sizes.auto:
        return (f'out of memory at iteration {iteration + 1} with micro-batches of {size} '
                f'samples (micro_batch={size}) of a batch of {samples} {where}. Set '
                "optimizer_config.micro_batch='auto' to halve it until it fits, or a smaller size")
    return (f'out of memory at iteration {iteration + 1} even with micro-batches of 1 sample '
            f'(a batch of {samples}) {where}: one sample does not fit. Lower the memory one '
            'sample needs (activation_checkpointing, fp16, a smaller input) or use a larger device')


def _log_new_size(runner, module: torch.nn.Module, samples: int, size: int) -> None:
    count = -(-samples // size)
    bn = any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in module.modules())
    runner.logger.warning(
        f"micro_batch='auto': out of memory with a batch of {samples} samples at iteration "
        f'{runner.iter + 1}; it now runs as {count} micro-batches of up to {size} samples (the '
        'same samples and one update; kept for the following iterations)'
        + ('; BatchNorm statistics now come from each micro-batch' if bn else ''))


# -- splitting a batch ---------------------------------------------------------
def split_batch(batch: Any, size: int) -> List[Tuple[Any, int]]:
    """``(micro-batch, samples)`` pairs of ``size`` samples (the last may be smaller).

    Splits along dim 0: every tensor (of one or more dims) must lead with the
    batch's sample count; a ``DataContainer`` is split per sample (its one
    chunk's stacked tensor or list), a list of that many entries none of
    which is a batched tensor is taken as one entry per sample (collated
    strings, metas, per-image box tensors); numbers, 0-dim tensors and
    other values go to every micro-batch. Anything else raises a one-line
    ``ConfigError``.
    """
    samples = batch_size(batch)
    if size >= samples:
        return [(batch, samples)]
    _check_splittable(batch, samples, 'batch')
    return [(_slice(batch, start, min(start + size, samples), samples),
             min(size, samples - start)) for start in range(0, samples, size)]


def _leads(value: Any, samples: int) -> bool:
    return isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] == samples


def _per_sample_list(value: Any, samples: int) -> bool:
    """A list of one entry per sample (not a structure of batched tensors)."""
    return isinstance(value, list) and len(value) == samples and \
        not any(_leads(v, samples) or isinstance(v, DataContainer) for v in value)


def _check_splittable(value: Any, samples: int, path: str) -> None:
    if isinstance(value, torch.Tensor):
        if value.dim() > 0 and value.shape[0] != samples:
            _refuse(f'{path} has {value.shape[0]} rows (shape {tuple(value.shape)})', samples)
    elif isinstance(value, DataContainer):
        if len(value.data) != 1 or len(value.data[0]) != samples:
            _refuse(f'{path} is a DataContainer of {[len(c) for c in value.data]} entries per '
                    'chunk', samples)
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_splittable(v, samples, f'{path}[{k!r}]')
    elif isinstance(value, (list, tuple)) and not _per_sample_list(value, samples):
        for i, v in enumerate(value):
            _check_splittable(v, samples, f'{path}[{i}]')


def _refuse(what: str, samples: int) -> None:
    raise ConfigError(f'the batch ran out of memory and cannot be split into micro-batches: '
                      f'{what} where the batch has {samples} samples. Make every tensor of a '
                      'batch lead with its sample dimension (docs/robustness.md), or set '
                      'micro_batch=None and lower samples_per_gpu', key=KEY)


def _slice(value: Any, start: int, stop: int, samples: int) -> Any:
    if isinstance(value, torch.Tensor):
        return value[start:stop] if value.dim() > 0 else value
    if isinstance(value, DataContainer):
        return DataContainer([value.data[0][start:stop]], value.stack, value.padding_value,
                             value.cpu_only, value.pad_dims)
    if isinstance(value, dict):
        return {k: _slice(v, start, stop, samples) for k, v in value.items()}
    if _per_sample_list(value, samples):
        return value[start:stop]
    if isinstance(value, tuple) and hasattr(value, '_fields'):  # namedtuple
        return type(value)(*(_slice(v, start, stop, samples) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(_slice(v, start, stop, samples) for v in value)
    return value
