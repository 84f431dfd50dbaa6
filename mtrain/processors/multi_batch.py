"""Several batches per optimizer step: multitask batches, or slices of a large batch.

``batch_processor = dict(type='MultiBatchProcessor', loss_reduction='sum')``.
See ``docs/batch_processors.md`` for the gradient arithmetic.
"""

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch

from ..registry import BATCH_PROCESSORS
from ..step.micro_batch import is_out_of_memory, out_of_memory_stop
from .base import BatchProcessor
from .losses import parse_losses
from .micro_batches import train_in_micro_batches
from .to_device import batch_size, to_device

LossCollector = Callable[[Any], Tuple[torch.Tensor, Dict[str, Any]]]


@dataclass
class MicroBatch:
    """The batch a :class:`MultiBatchProcessor` is working on, for the inner hook points.

    Hooks read it as ``runner.batch_processor.current`` at ``before_forward``,
    ``after_forward``, ``before_backward`` and ``after_backward``.
    """

    index: int  #: position in the step's tuple, 0-based
    count: int  #: batches in this step
    batch: Any  #: the batch, on the device, transformed
    task_name: Optional[str] = None  #: ``batch['task_name']`` when it names one task
    output: Any = None  #: the model's output (from ``after_forward`` on)
    loss: Optional[torch.Tensor] = None  #: the loss to backpropagate (from ``before_backward``)


@BATCH_PROCESSORS.register_module()
class MultiBatchProcessor(BatchProcessor):
    """Forward and backward each batch of a step in turn; the optimizer then steps once.

    Contract: when the loader yields a tuple (not a namedtuple), each element
    is a batch of its own (one task's batch in multitask training, or one
    slice of a large batch); anything else is one batch. For each batch: move
    it to the device, apply ``batch_transforms``, convert to channels_last
    (if asked), forward under autocast (when fp16 is on), collect the losses
    and backward at once through ``runner.optimizer_hook.backward``, so that
    batch's activations are freed before the next one and loss scaling and
    accumulation factors apply. The gradients of all batches add up in
    ``.grad``; after the last one the OptimizerHook applies one update from
    their sum (``loss_reduction='sum'``) or their mean (``'mean'``: each loss
    is divided by the number of batches, so k equal slices of a batch give the
    update of the whole batch). Returns ``dict(loss, log_vars, num_samples)``
    like :class:`BasicBatchProcessor`; ``loss`` is detached (already
    backpropagated) and ``num_samples`` counts all batches.

    Logging: a batch whose dict has ``task_name`` (a string, or the list of
    equal strings a loader collates) logs its values as ``<task>.<key>``,
    e.g. ``vehicle.loss``; ``loss`` is the total that was backpropagated.
    Unnamed batches' loss terms are summed (``'sum'``) or averaged
    (``'mean'``); other values (accuracies) are averaged over the batches.

    Under DDP every forward/backward but the last of a step that updates
    runs in ``no_sync()``, so gradients are all-reduced once per update,
    overlapped with the last backward. With task-specific heads set
    ``find_unused_parameters=True``: since PyTorch 2.4 DDP also reduces the
    gradients that earlier ``no_sync()`` backwards accumulated for
    parameters the last batch did not use, so every head stays equal across
    ranks (tests/parallel/test_multitask.py checks it on 2 processes).

    Config::

        batch_processor = dict(type='MultiBatchProcessor', loss_reduction='mean',
                               batch_transforms=[dict(type='MyMixup', alpha=0.2)])

    Args:
        loss_reduction: ``'sum'`` (default: each batch's loss at full weight,
            as a multitask objective) or ``'mean'`` (divided by the number of
            batches in the step).
        batch_transforms: callables ``batch -> batch`` applied on the device,
            in order (the builder builds config dicts from ``TRANSFORMS``).
        loss_collector: ``output -> (loss, log_vars)``, or its import path
            ``'package.module:function'``; default: the model contract's
            :func:`parse_losses`.
        empty_cache: call ``torch.cuda.empty_cache()`` after each batch (CUDA
            only; trades speed for a lower memory peak between batches).
        autocast_dtype, channels_last: as in :class:`~mtrain.processors.base.BatchProcessor`.
    """

    does_backward = True
    splits_micro_batches = True  # optimizer_config.micro_batch (see .micro_batches)

    def __init__(self, loss_reduction: str = 'sum',
                 batch_transforms: Optional[Sequence[Callable[[Any], Any]]] = None,
                 loss_collector: Union[LossCollector, str, None] = None,
                 empty_cache: bool = False,
                 autocast_dtype: Union[torch.dtype, str, None] = None,
                 channels_last: bool = False) -> None:
        super().__init__(autocast_dtype=autocast_dtype, channels_last=channels_last)
        if loss_reduction not in ('sum', 'mean'):
            raise ValueError(f"loss_reduction must be 'sum' or 'mean', got {loss_reduction!r}")
        self.batch_transforms = list(batch_transforms or [])
        for i, transform in enumerate(self.batch_transforms):
            if not callable(transform):
                raise TypeError(f'batch_transforms[{i}] must be callable (batch -> batch), got '
                                f'{transform!r}; config dicts are built by the builder from '
                                'the TRANSFORMS registry')
        self.loss_reduction = loss_reduction
        self.loss_collector = _resolve_collector(loss_collector)
        self.empty_cache = empty_cache
        self.current: Optional[MicroBatch] = None

    def __call__(self, runner, batch: Any, train_mode: bool) -> Dict[str, Any]:
        batches = split_batches(batch)
        if not train_mode:
            return self._eval(runner, batches)
        if runner.optim_step is None:
            raise RuntimeError('MultiBatchProcessor does the backward itself and needs an '
                               'OptimizerHook: set optimizer_config (e.g. dict(grad_clip=None))')
        if runner.optim_step.micro_batch.enabled:
            return self._combine([self._in_micro_batches(runner, i, item, len(batches))
                                  for i, item in enumerate(batches)])
        try:
            return self._combine(self._each(runner, batches))
        except RuntimeError as e:  # (no cost until raised)
            if is_out_of_memory(e):
                raise out_of_memory_stop(e, ' + '.join(str(batch_size(b)) for b in batches),
                                         'forward or backward') from e
            raise

    def _each(self, runner, batches: List[Any]) -> List[Tuple]:
        results = []
        for i, item in enumerate(batches):
            # DDP all-reduces in the last backward of a step that updates, and only there
            with self.grad_sync(runner, final=i == len(batches) - 1):
                results.append(self._forward_backward(runner, MicroBatch(i, len(batches), item)))
            if self.empty_cache and runner.device.type == 'cuda':
                torch.cuda.empty_cache()
        return results

    def _in_micro_batches(self, runner, index: int, item: Any, count: int) -> Tuple:
        """One batch of the step run as micro-batches (``optimizer_config.micro_batch``).

        The batch is moved and transformed whole (a mixup draws for the whole
        batch, as without micro-batches), then split.
        """
        item = self._prepare(runner, item)
        task = task_name_of(item)

        def forward(runner, part: Any) -> Tuple[torch.Tensor, Dict[str, Any]]:
            self.current = MicroBatch(index, count, part, task)
            try:  # (an out-of-memory error must not leave the graph referenced here)
                runner.call_hook('before_forward')
                with self.autocast(runner.device):
                    self.current.output = runner.model_wrapper.train_step(part)
                runner.call_hook('after_forward')
                return self.loss_collector(self.current.output)
            finally:
                self.current = None

        divisor = count if self.loss_reduction == 'mean' else 1
        loss, log_vars, samples = train_in_micro_batches(
            self, runner, item, forward, divisor, first=index == 0, final=index == count - 1)
        if self.empty_cache and runner.device.type == 'cuda':
            torch.cuda.empty_cache()
        return task, log_vars, loss, samples

    def _forward_backward(self, runner, micro: MicroBatch) -> Tuple:
        micro.batch = self._prepare(runner, micro.batch)
        micro.task_name = task_name_of(micro.batch)
        self.current = micro
        runner.call_hook('before_forward')  # hooks read self.current (output set after)
        with self.autocast(runner.device):
            micro.output = runner.model_wrapper.train_step(micro.batch)
        runner.call_hook('after_forward')
        loss, log_vars = self.loss_collector(micro.output)
        micro.loss = loss / micro.count if self.loss_reduction == 'mean' else loss
        self.backward(runner, micro.loss)
        self.current = None  # drop the references to this batch's graph
        return micro.task_name, log_vars, micro.loss.detach(), batch_size(micro.batch)

    def _prepare(self, runner, batch: Any) -> Any:
        batch = to_device(batch, runner.device)
        for transform in self.batch_transforms:
            batch = transform(batch)
        return self.to_channels_last(runner, batch) if self.channels_last else batch

    def _combine(self, results: List[Tuple]) -> Dict[str, Any]:
        """The step's outputs: per-task (or merged) log values and the total loss."""
        groups: Dict[Optional[str], List[Dict[str, Any]]] = {}
        for task, log_vars, _, _ in results:
            groups.setdefault(task, []).append(log_vars)
        log_vars: Dict[str, Any] = {}
        for task, group in groups.items():
            for key in dict.fromkeys(k for lv in group for k in lv):
                values = [lv[key] for lv in group if key in lv]
                merged = sum(values)
                if 'loss' not in key or self.loss_reduction == 'mean':
                    merged = merged / len(values)
                log_vars[key if task is None else f'{task}.{key}'] = merged
        total = sum(loss for _, _, loss, _ in results)
        log_vars['loss'] = total
        return {'loss': total, 'log_vars': log_vars,
                'num_samples': sum(n for _, _, _, n in results)}

    def _eval(self, runner, batches: List[Any]) -> Dict[str, Any]:
        """Eval mode: each batch evaluated; losses combined, predictions kept."""
        outputs = [self._eval_one(runner, b) for b in batches]
        if len(outputs) == 1:
            return outputs[0]
        if all('loss' in out for out in outputs):
            names = [task_name_of(b) for b in batches]
            scale = 1 / len(outputs) if self.loss_reduction == 'mean' else 1
            return self._combine([(name, out['log_vars'], out['loss'] * scale, out['num_samples'])
                                  for name, out in zip(names, outputs)])
        return {'predictions': tuple(out.get('predictions') for out in outputs),
                'num_samples': sum(out['num_samples'] for out in outputs)}

    def _eval_one(self, runner, batch: Any) -> Dict[str, Any]:
        batch = to_device(batch, runner.device)
        if self.channels_last:
            batch = self.to_channels_last(runner, batch)
        return self.evaluate(runner, batch)


def split_batches(batch: Any) -> List[Any]:
    """The batches of one step: a tuple's elements, or ``[batch]``."""
    if isinstance(batch, tuple) and not hasattr(batch, '_fields'):
        if not batch:
            raise ValueError('the loader yielded an empty tuple: no batch to train on')
        return list(batch)
    return [batch]


def task_name_of(batch: Any) -> Optional[str]:
    """``batch['task_name']`` if it names one task (a string or a list of equal strings)."""
    if not isinstance(batch, dict) or 'task_name' not in batch:
        return None
    name = batch['task_name']
    if isinstance(name, str):
        return name
    if isinstance(name, (list, tuple)) and name and isinstance(name[0], str) \
            and all(n == name[0] for n in name):
        return name[0]
    return None


def _resolve_collector(collector: Union[LossCollector, str, None]) -> LossCollector:
    if collector is None:
        return parse_losses
    if callable(collector):
        return collector
    if isinstance(collector, str) and ':' in collector:
        module, _, name = collector.partition(':')
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as e:
            raise ValueError(f"loss_collector '{collector}' could not be imported ({e}); give "
                             "'package.module:function' of an importable function") from e
    raise TypeError(f"loss_collector must be a callable or 'package.module:function', "
                    f'got {collector!r}')
