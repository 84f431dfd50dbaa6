"""What every runner shares: hooks, counters, checkpoints; no loop of its own.

The base runner knows nothing of configs: it takes a built model,
optimizer and batch processor. ``EpochBasedRunner`` and ``IterBasedRunner``
add the loop. Use it from Python as in mmcv 1.x::

    runner = EpochBasedRunner(model, optimizer=opt, work_dir='work_dirs/x',
                              max_epochs=3)
    runner.register_training_hooks(lr_config=dict(policy='step', step=[2]),
                                   optimizer_config=dict(grad_clip=None),
                                   log_config=dict(interval=10))
    runner.run([train_loader], [('train', 1)])
"""

import logging
import math
import os
import os.path as osp
import signal
import time
import warnings
from contextlib import contextmanager
from operator import attrgetter
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

import torch
from torch import nn

from ..hooks.hook import STAGES, Hook
from ..hooks.optimizer import OptimizerHook
from ..parallel import ModelWrapper, is_module_wrapper
from ..processors import BasicBatchProcessor
from ..utils import get_dist_info, get_logger, get_priority
from ..utils.dist import sum_by_key
from ..utils.errors import AssertedTypeError
from ..utils.modules import module_device
from .arguments import check_runner_arguments
from .batch_function import BatchFunctionProcessor, is_mmcv_batch_function
from .checkpoint_writer import CheckpointWriter
from .hook_registration import HookRegistration
from .log_buffer import LogBuffer
from .preemption import StopSignals
from .run_checkpoints import RunnerCheckpoints


class BaseRunner(HookRegistration, RunnerCheckpoints):
    """Holds the run's state and calls hooks; subclasses implement ``run``.

    The arguments, their order and their checks are mmcv 1.x's.

    Args:
        model: the model, kept as passed in ``runner.model`` (as mmcv). The
            steps call :attr:`model_wrapper`: the model itself if it is a
            wrapper (:func:`~mtrain.parallel.is_module_wrapper`), else a
            ``ModelWrapper`` of it. A model with its own ``train_step``
            follows mmcv's model contract (see :mod:`mtrain.parallel.batch_call`).
        batch_processor: what a step does with a batch: an mtrain processor
            object (default ``BasicBatchProcessor``), or mmcv's
            ``batch_processor(model, data, train_mode, **kwargs)`` function
            (see :mod:`.batch_function`).
        optimizer: a torch optimizer, a dict of them (GAN-style: the model's
            ``train_step`` steps each itself, ``optimizer_config=None``), or None.
        work_dir: where checkpoints and logs go (created on rank 0).
        logger: a ``logging.Logger`` (default: the ``mtrain`` logger; mmcv
            requires one).
        meta: extra information stored in checkpoints (config text, seed...).
        max_iters / max_epochs: the run's length (give one at most).
    """

    default_ckpt_tmpl = 'epoch_{}.pth'

    def __init__(self, model: nn.Module, batch_processor: Any = None,
                 optimizer: Union[torch.optim.Optimizer, Dict[str, torch.optim.Optimizer],
                                  None] = None,
                 work_dir: Optional[str] = None, logger: Optional[logging.Logger] = None,
                 meta: Optional[Dict[str, Any]] = None, max_iters: Optional[int] = None,
                 max_epochs: Optional[int] = None) -> None:
        check_runner_arguments(model, batch_processor, optimizer, work_dir, logger, meta,
                               max_iters, max_epochs)
        #: The model as passed (mmcv's ``runner.model``): hooks may read ``runner.model.fc``.
        self.model = model
        self._wrapper: Tuple[Optional[nn.Module], Optional[nn.Module]] = (None, None)
        self.optimizer = optimizer
        if is_mmcv_batch_function(batch_processor):
            warnings.warn('batch_processor is deprecated, please implement train_step() and '
                          'val_step() in the model instead.', DeprecationWarning, stacklevel=2)
            batch_processor = BatchFunctionProcessor(batch_processor)
        self.batch_processor = batch_processor or BasicBatchProcessor()
        self.rank, self.world_size = get_dist_info()
        self.work_dir = osp.abspath(work_dir) if work_dir else None
        if self.work_dir and self.rank == 0:
            os.makedirs(self.work_dir, exist_ok=True)
        self.logger = logger or get_logger()
        self.meta = dict(meta or {})
        self.timestamp = time.strftime('%Y%m%d_%H%M%S', time.localtime())
        self.device = module_device(self.model_wrapper)
        self.mode: Optional[str] = None
        self.data_loader = None
        self.data_batch = None
        self.outputs: Dict[str, Any] = {}
        self.eval_results: Dict[str, float] = {}  # the last evaluation's metrics
        self.log_buffer = LogBuffer()
        self.optimizer_hook: Optional[OptimizerHook] = None
        self.should_stop = False  # set by a hook (early stopping) to end the run cleanly
        self.preempted_by: Optional[str] = None  # the signal that asked the run to stop
        self._stop_signals = StopSignals(self.world_size)  # see stop_on_signals
        self._polls_signals = False  # whether the loops ask after each iteration (DDP)
        # How logged sums are combined over ranks at a log interval (None: one process).
        self.reduce_log_values = sum_by_key if self.world_size > 1 else None
        self._hooks: List[Hook] = []
        self._stage_hooks: Dict[str, List[Hook]] = {s: [] for s in STAGES}
        # What call_hook runs: (hook, method name) per stage, keyed on Hook.methods_version.
        self._stage_calls: Dict[str, Tuple[Tuple[Hook, str], ...]] = {s: () for s in STAGES}
        self._hooked_stages: frozenset = frozenset()
        self._dispatch_version = -1
        self._checkpoint_writer = CheckpointWriter()
        self._stage_end: List[Callable[[], Any]] = []  # see at_stage_end
        self._epoch = 0
        self._iter = 0
        self._inner_iter = 0
        self._start_inner_iter = 0  # where the next epoch starts (non-zero after a resume)
        # The train loader's batch size, and (world size, batch size) of a resumed run.
        self._samples_per_gpu: Optional[int] = None
        self._resume_geometry: Optional[Tuple[int, int]] = None
        # The loop's place in its workflow, the non-train loaders' passes (workflow_position.py).
        self._workflow: Optional[List[Tuple[str, int]]] = None
        self._phase: Tuple[int, int] = (0, 0)
        self._phase_passes: Dict[int, Tuple[Any, int]] = {}
        self.num_updates = 0  # the one counter of optimizer updates
        self._max_epochs = max_epochs
        self._max_iters = max_iters

    # -- read-only state ---------------------------------------------------
    @property
    def model_wrapper(self) -> nn.Module:
        """What the steps call: ``runner.model`` if it is a wrapper, else a ``ModelWrapper`` of it.

        Made once per model object (keyed on ``runner.model``'s identity, so
        assigning another model to ``runner.model`` is followed).
        """
        model, wrapper = self._wrapper
        if model is not self.model:
            wrapper = self.model if is_module_wrapper(self.model) else ModelWrapper(self.model)
            self._wrapper = (self.model, wrapper)
        return wrapper

    @property
    def model_name(self) -> str:
        """The class name of the model, inside its wrapper if any (as mmcv)."""
        return type(getattr(self.model, 'module', self.model)).__name__

    # Read-only, as mmcv's. Their getters are C functions (operator.attrgetter), not Python
    # ones: the hooks read them a dozen times an iteration, and a Python getter costs a frame.
    hooks = property(attrgetter('_hooks'), doc='The registered hooks, in priority order.')
    epoch = property(attrgetter('_epoch'), doc='Completed epochs (passes over the train loader).')
    iter = property(attrgetter('_iter'), doc='Completed training iterations.')
    inner_iter = property(attrgetter('_inner_iter'), doc='Iterations done in the current epoch.')
    max_epochs = property(attrgetter('_max_epochs'), doc='The run length in epochs, or None.')
    max_iters = property(attrgetter('_max_iters'), doc='The run length in iterations, or None.')

    @property
    def optim_step(self):
        """The run's :class:`~mtrain.step.OptimStep` (None without an optimizer hook)."""
        return None if self.optimizer_hook is None else self.optimizer_hook.optim_step

    @property
    def cumulative_iters(self) -> int:
        return 1 if self.optimizer_hook is None else self.optimizer_hook.cumulative_iters

    @property
    def max_updates(self) -> int:
        """Optimizer updates in the whole run (the last accumulation window may be short)."""
        return math.ceil(self.max_iters / self.cumulative_iters)

    @property
    def updates_per_epoch(self) -> float:
        return len(self.data_loader) / self.cumulative_iters

    # -- hooks -------------------------------------------------------------
    def register_hook(self, hook: Hook, priority: Union[int, str, None] = None) -> None:
        """Add ``hook``; equal priorities keep registration order (as mmcv)."""
        if not isinstance(hook, Hook):
            # mmcv asserts here: catchable as TypeError and AssertionError
            raise AssertedTypeError(f'{type(hook).__name__} is not an mtrain Hook: subclass '
                                    'mtrain.hooks.Hook (mmcv.runner.Hook under the mmcv route)')
        hook.priority = get_priority(hook.priority if priority is None else priority)
        index = len(self._hooks)
        while index > 0 and self._hooks[index - 1].priority > hook.priority:
            index -= 1
        self._hooks.insert(index, hook)
        if isinstance(hook, OptimizerHook):
            if isinstance(self.optimizer, dict):
                raise ValueError(
                    f'{type(hook).__name__} steps one optimizer, but this runner has a dict of '
                    f'optimizers ({", ".join(self.optimizer)}), which the model\'s train_step '
                    'steps itself; set optimizer_config=None')
            self.optimizer_hook = hook
        self._dispatch()

    def _dispatch(self) -> None:
        """Which hook acts at which stage, through which method name.

        Rebuilt at each registration and whenever a stage method is assigned
        on a hook instance (``Hook.methods_version``); the methods themselves
        are looked up by name at every call, so a replaced one is called.
        """
        self._dispatch_version = Hook.methods_version
        self._stage_hooks = {s: [h for h in self._hooks if s in h.triggered_stages()]
                             for s in STAGES}
        self._stage_calls = {s: tuple((h, h.name_for(s)) for h in hooks)
                             for s, hooks in self._stage_hooks.items()}
        self._hooked_stages = frozenset(s for s, calls in self._stage_calls.items() if calls)

    @property
    def hooked_stages(self) -> frozenset:
        """The stages at which some hook acts.

        The points inside an iteration (``before_forward`` …
        ``before_optimizer_step``) are called only when in here, so a run
        without such hooks pays nothing for them.
        """
        if self._dispatch_version != Hook.methods_version:
            self._dispatch()
        return self._hooked_stages

    def call_hook(self, stage: str) -> None:
        """Call every hook that acts at ``stage``, in priority order (mmcv's ``call_hook``)."""
        if self._dispatch_version != Hook.methods_version:
            self._dispatch()
        for hook, name in self._stage_calls[stage]:
            getattr(hook, name)(self)

    def current_lr(self) -> Union[List[float], Dict[str, List[float]]]:
        """Each param group's lr; ``{name: [...]}`` for a dict of optimizers (as mmcv)."""
        return _per_optimizer(self.optimizer, 'lr', lambda g: g['lr'])

    def current_momentum(self) -> Union[List[float], Dict[str, List[float]]]:
        """Each group's momentum (Adam's ``betas[0]``, else 0), per name for a dict of optimizers."""
        return _per_optimizer(self.optimizer, 'momentum', lambda g: g['momentum'] if 'momentum'
                              in g else g['betas'][0] if 'betas' in g else 0)

    # -- the steps shared by all loops ---------------------------------------
    def run_iter(self, data_batch: Any, train_mode: bool) -> None:
        """Run the batch processor and queue its logged values (no host sync)."""
        outputs = self.batch_processor(self, data_batch, train_mode)
        if 'log_vars' in outputs:
            self.log_buffer.update(outputs['log_vars'], outputs['num_samples'])
        self.outputs = outputs

    # -- preemption ----------------------------------------------------------
    @contextmanager
    def _starting_run(self) -> Iterator[None]:
        """Around a run's start (its checks and ``before_run``): a failure there puts the
        handlers :meth:`stop_on_signals` installed back, as the end of a run does."""
        try:
            yield
        except BaseException:
            self._stop_signals.restore()
            raise

    def stop_on_signals(self, signals=(signal.SIGTERM, signal.SIGINT),
                        check_interval: int = 10) -> None:
        """On SIGTERM/SIGINT: finish the iteration, save a checkpoint, raise :class:`Preempted`.

        A second signal while stopping interrupts at once. Under DDP the ranks
        agree every ``check_interval`` iterations on whether any was signalled
        and stop after the same iteration (:mod:`.preemption`). The handlers
        that were installed before are restored when ``run()`` ends, however
        it ends (also when a hook's ``before_run`` fails).
        """
        self._stop_signals.restore()
        self._stop_signals = StopSignals(self.world_size, check_interval)

        def on_first(signum):
            self.logger.warning(f'{signal.Signals(signum).name} received: stopping '
                                f'{self._stop_signals.describe_wait()} and saving a checkpoint')
            if self.world_size == 1:
                self._poll_stop_signal()

        self._stop_signals.install(signals, on_first)
        self._polls_signals = self.world_size > 1  # one process stops from the handler

    def _poll_stop_signal(self, at_end: bool = False) -> None:
        """After an iteration (``iter`` not yet advanced): stop if a signal came."""
        name = self._stop_signals.agreed(self._iter + 1, at_end)
        if name is not None and self.preempted_by is None:
            self.preempted_by = name
            self.should_stop = True

    def _save_if_preempted(self) -> None:
        self._poll_stop_signal(at_end=True)  # a signal after the last agreement point
        if self.preempted_by is None:
            return
        path = None
        if self.work_dir is not None:
            self.gather_checkpoint_state()  # every rank; rank 0 writes
            name = f'iter_{self._progress()["iter"]}.pth'  # the iterations done
            path = self.save_checkpoint(self.work_dir, filename_tmpl=name)
        raise Preempted(self.preempted_by, self._progress()['iter'], path)


class Preempted(RuntimeError):
    """The run was stopped by a signal after saving a checkpoint."""

    def __init__(self, signal_name: str, iteration: int, checkpoint: Optional[str]) -> None:
        self.signal_name, self.iteration, self.checkpoint = signal_name, iteration, checkpoint
        where = f'; checkpoint saved to {checkpoint}' if checkpoint else ''
        super().__init__(f'training stopped by {signal_name} after iteration {iteration}{where}. '
                         'Resume with: python tools/train.py CONFIG --auto-resume '
                         '(or --resume-from the checkpoint)')


def _per_optimizer(optimizer: Any, what: str, value: Callable) -> Any:
    if optimizer is None:
        raise RuntimeError(f'{what} is not applicable because the runner has no optimizer')
    if isinstance(optimizer, dict):
        return {name: [value(g) for g in optim.param_groups] for name, optim in optimizer.items()}
    return [value(g) for g in optimizer.param_groups]
