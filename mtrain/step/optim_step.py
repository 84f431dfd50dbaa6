"""One optimizer update, owned by one object.

Every optimizer hook and every batch processor drives the same
:class:`OptimStep`; one training iteration is, in execution order::

    output = model.train_step(batch)            # the batch processor (under autocast)
    step.backward(loss, iteration)              # ÷ window length, × loss scale, backward
    if step.ends_window(iteration):             # the last iteration of an accumulation window
        step.unscale_()                         # .grad holds the true gradients from here on
        result = step.update()                  # clip → optimizer.step() → scale update → zero_grad

The step knows nothing of runners or hooks: the caller (``OptimizerHook`` or a
batch processor that back-propagates itself) calls the hook points around it
and records ``result`` (the update count, ``grad_norm``, skipped steps).

A skip decided on the device (a fused optimizer, see :class:`OptimStep`) is not
known to the host when ``update`` returns: the result says ``deferred``, and
the caller learns the skips from :meth:`OptimStep.take_device_skips` when it
next reads (at a log line).
"""

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.utils import clip_grad_norm_

from ..utils import all_ranks_true, get_dist_info
from ..utils.autograd import log_unused_parameters
from ..utils.dist import all_ranks_true_on_device
from .amp import parse_dtype, parse_loss_scale
from .skip_counter import SkipCounter


@dataclass(frozen=True)
class UpdateResult:
    """What :meth:`OptimStep.update` did."""

    stepped: bool  #: the optimizer applied the update (as far as the host knows)
    grad_norm: Optional[torch.Tensor] = None  #: total norm before clipping (with grad_clip)
    skipped_because: Optional[str] = None  #: why the update was skipped
    #: ``optimizer.step()`` ran with a device-side verdict (``found_inf``) that may
    #: have skipped it; :meth:`OptimStep.take_device_skips` tells, at the next read.
    deferred: bool = False


STEPPED = UpdateResult(True)  #: the common result (stepped, no norm), made once
STEPPED_DEFERRED = UpdateResult(True, deferred=True)  #: stepped unless the device skipped it


class OptimStep:
    """Backward, accumulation window, loss scaling, clipping and the optimizer step.

    Args:
        grad_clip: ``torch.nn.utils.clip_grad_norm_`` arguments, e.g.
            ``dict(max_norm=35, norm_type=2)``; applied to unscaled gradients.
        cumulative_iters: iterations whose gradients add up before one update.
            As in mmcv 1.x the windows follow the global iteration count and
            each loss is divided by the window length; the run's last, shorter
            window divides by its own length.
        amp_dtype: ``'float16'``/``'bfloat16'`` for autocast (the batch
            processor runs the forward in it), None for full precision.
        loss_scale: with float16: a number (static), ``'dynamic'`` or a dict
            of ``GradScaler`` arguments; None for no scaling (fp32, bf16).
        detect_anomalous_params: log each parameter the loss does not depend
            on, at every backward (slow; for debugging DDP's unused parameters).

    ``skip_nonfinite`` (set by ``nan_policy=dict(action='skip')``): a window
    whose loss was not finite on any rank is dropped whole, without an update.
    Under loss scaling ``GradScaler``'s own check does this (a non-finite loss
    gives non-finite gradients).

    Where the verdict is read follows ``GradScaler``'s rule. An optimizer with
    ``_step_supports_amp_scaling`` (torch's ``fused=True`` SGD, Adam, AdamW)
    takes it on the device: ``optimizer.found_inf`` is set to 1.0 and its
    kernels leave parameters and state untouched, so the update costs no host
    sync; the skip is counted on the device too and ``update`` returns a
    ``deferred`` result (``take_device_skips`` tells at the next log line).
    Any other optimizer has no cheap way to undo a step, so the verdict is read
    back once per update and ``optimizer.step()`` is not called. Until the
    first update of a run has been applied the verdict is read in either case:
    torch's fused SGD creates its momentum buffers uninitialised when its
    first step is skipped on the device. Under GradScaler a fused optimizer
    skips overflows on the device the same way (counted there too); a
    skipped step that created the optimizer's state has that state dropped.
    """

    def __init__(self, grad_clip: Optional[Dict[str, Any]] = None, cumulative_iters: int = 1,
                 amp_dtype: Any = None, loss_scale: Any = None,
                 detect_anomalous_params: bool = False) -> None:
        if grad_clip is not None and not isinstance(grad_clip, dict):
            raise TypeError(f'grad_clip must be None or a dict such as dict(max_norm=35), '
                            f'got {grad_clip!r}')
        if not isinstance(cumulative_iters, int) or cumulative_iters <= 0:
            raise ValueError(f'cumulative_iters must be a positive integer, '
                             f'got {cumulative_iters!r}')
        self.grad_clip = grad_clip
        self.cumulative_iters = cumulative_iters
        self.amp_dtype = None if amp_dtype is None else parse_dtype(amp_dtype)
        self.scaler_args, self.static_scale = (
            (None, None) if loss_scale is None else parse_loss_scale(loss_scale))
        self.detect_anomalous_params = detect_anomalous_params
        self.skip_nonfinite = False
        self.overflow_skips = SkipCounter()  # updates GradScaler skipped (inf/NaN gradients)
        self.nonfinite_skips = SkipCounter()  # windows dropped for a non-finite loss
        self.optimizer: Optional[torch.optim.Optimizer] = None
        self.scaler: Optional[torch.amp.GradScaler] = None
        self.max_iters: Optional[int] = None
        self._params: List[nn.Parameter] = []
        self._names: List[str] = []
        self._model: Optional[nn.Module] = None
        self.logger = None
        self._window_finite: Optional[torch.Tensor] = None
        self._rank_grads: Optional[List[Dict[str, torch.Tensor]]] = None
        self._pending: Dict[str, Any] = {}
        self._stepped = False
        self._found_inf: Optional[torch.Tensor] = None  # a fused step's verdict from GradScaler
        self._post_hook = None
        self._fused = False  # the optimizer skips on the device when given found_inf
        self._applied = False  # an update of this run is known to have been applied

    # -- set up once per run -------------------------------------------------
    def setup(self, optimizer: torch.optim.Optimizer, device: torch.device,
              max_iters: Optional[int], model: Optional[nn.Module] = None,
              logger: Any = None) -> None:
        """Bind the optimizer, the run's length and the user's model; restore a resumed state."""
        self.optimizer, self.max_iters, self._model = optimizer, max_iters, model
        self.logger = logger
        # The parameter list is fixed for the run: collect it once, not per step.
        self._params = [p for group in optimizer.param_groups for p in group['params']
                        if p.requires_grad]
        names = {id(p): n for n, p in model.named_parameters()} if model is not None else {}
        self._names = [names.get(id(p), f'param.{i}') for i, p in enumerate(self._params)]
        self._fused = getattr(optimizer, '_step_supports_amp_scaling', False)
        self._applied = False
        counter_device = self._params[0].device if self._params else device
        self.overflow_skips.place(counter_device)
        self.nonfinite_skips.place(counter_device)
        if self.scaler_args is not None:
            self.scaler = torch.amp.GradScaler(device.type, **self.scaler_args)
            # GradScaler.step skips optimizer.step() on inf/NaN gradients and says so
            # nowhere public; a step post-hook is the public way to know. (A fused
            # optimizer's step runs either way, handed the verdict as found_inf.)
            self._post_hook = optimizer.register_step_post_hook(self._mark_stepped)
        optimizer.zero_grad(set_to_none=True)
        pending, self._pending = self._pending, {}
        if pending:
            self.load_state_dict(pending)

    def teardown(self) -> None:
        if self._post_hook is not None:
            self._post_hook.remove()
            self._post_hook = None

    def _mark_stepped(self, optimizer, args, kwargs) -> None:
        found_inf = getattr(optimizer, 'found_inf', None)
        if found_inf is None:
            self._stepped = True
        else:  # GradScaler handed a fused step its verdict: it skipped on the device, or not
            self._found_inf = found_inf == 1  # (what the kernels test)

    # -- skip counts ---------------------------------------------------------
    @property
    def skipped_overflow(self) -> int:
        """Updates GradScaler skipped (reads the device counter: ask at log lines, not per step)."""
        return self.overflow_skips.value()

    @skipped_overflow.setter
    def skipped_overflow(self, count: int) -> None:
        self.overflow_skips.set(count)

    @property
    def skipped_nonfinite(self) -> int:
        """Windows dropped for a non-finite loss (reads the device counter, as above)."""
        return self.nonfinite_skips.value()

    @skipped_nonfinite.setter
    def skipped_nonfinite(self, count: int) -> None:
        self.nonfinite_skips.set(count)

    def take_device_skips(self) -> Dict[str, int]:
        """``{'overflow': n, 'nonfinite': m}``: skips decided on the device since the last call.

        One read of each counter that a ``deferred`` update may have moved
        (none otherwise); the caller corrects its update count by them.
        """
        return {'overflow': self.overflow_skips.take_new(),
                'nonfinite': self.nonfinite_skips.take_new()}

    # -- the accumulation window ---------------------------------------------
    def ends_window(self, iteration: int) -> bool:
        """Whether iteration ``iteration`` (0-based) ends with an optimizer update."""
        return (self.cumulative_iters == 1 or (iteration + 1) % self.cumulative_iters == 0
                or iteration + 1 == self.max_iters)

    def loss_divisor(self, iteration: int) -> int:
        """What iteration ``iteration``'s loss is divided by (the window's length)."""
        k = self.cumulative_iters
        if k == 1:
            return 1
        divisible_end = self.max_iters // k * k
        return k if iteration < divisible_end else self.max_iters - divisible_end

    @property
    def window_in_progress(self) -> bool:
        """Whether gradients of an unfinished window are waiting in ``.grad``."""
        return any(p.grad is not None for p in self._params)

    # -- the step, in execution order ----------------------------------------
    def backward(self, loss: torch.Tensor, iteration: int) -> None:
        """Back-propagate ``loss`` ÷ the window length, times the loss scale."""
        if self.detect_anomalous_params:
            log_unused_parameters(loss, self._model, self.logger)
        if self.skip_nonfinite:  # stays on the device; read once, at the update
            finite = torch.isfinite(loss.detach())
            self._window_finite = (finite if self._window_finite is None
                                   else self._window_finite & finite)
        if self.cumulative_iters != 1:
            loss = loss / self.loss_divisor(iteration)
        if self.scaler is not None:
            loss = self.scaler.scale(loss)
        loss.backward()

    def unscale_(self) -> None:
        """Divide the gradients by the loss scale (nothing to do without one)."""
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)

    def update(self) -> UpdateResult:
        """Clip → step (through the scaler) → update the scale → zero_grad."""
        finite = self._window_verdict() if self.skip_nonfinite and self.scaler is None else True
        if finite is False:
            self.optimizer.zero_grad(set_to_none=True)  # the whole window is dropped
            self.nonfinite_skips.add_known()
            return UpdateResult(False, None, 'the loss was not finite')
        grad_norm = self.clip_grads() if self.grad_clip is not None else None
        if self.scaler is not None:
            stepped, deferred = self._scaler_step()
        elif finite is True:
            self.optimizer.step()
            stepped, deferred = True, False
        else:  # the ranks' verdict, left on the device
            self._step_unless_skipped(finite)
            stepped, deferred = True, True
        self.optimizer.zero_grad(set_to_none=True)
        if deferred:
            return (STEPPED_DEFERRED if grad_norm is None
                    else UpdateResult(True, grad_norm, deferred=True))
        if not stepped:
            self.overflow_skips.add_known()
            return UpdateResult(False, None, 'inf/NaN gradients')  # an overflowed norm is inf
        self._applied = True
        return STEPPED if grad_norm is None else UpdateResult(True, grad_norm)

    def _window_verdict(self) -> Union[bool, torch.Tensor]:
        """Whether the window's losses were finite on every rank.

        Read back (a bool), or left on the device (the agreed bool tensor)
        for an optimizer that skips there (see the class docstring).
        """
        finite, self._window_finite = self._window_finite, None
        if finite is None:
            return True  # no loss went back in this window
        if self._fused and self._applied:
            return all_ranks_true_on_device(finite)
        return all_ranks_true(finite)  # every rank skips if any must: weights stay equal

    def _scaler_step(self) -> Tuple[bool, bool]:
        """GradScaler's step and scale update: ``(stepped, deferred)``."""
        self._stepped, self._found_inf = False, None
        fresh = self._fused and not self.optimizer.state  # this step creates the state
        self.scaler.step(self.optimizer)  # skips optimizer.step() on inf/NaN gradients
        self.scaler.update(self.static_scale)  # a static scale is set back every step
        if self._found_inf is None:
            return self._stepped, False
        # A fused optimizer was stepped with GradScaler's verdict and skipped, or not, on
        # the device (GradScaler reads nothing back for it): count it there.
        found_inf, self._found_inf = self._found_inf, None
        self.overflow_skips.add_on_device(found_inf)
        if fresh and self.optimizer.state and bool(found_inf):  # (one read, first steps only)
            self.optimizer.state.clear()  # fused SGD's new momentum: uninitialised memory
        return True, True

    def _step_unless_skipped(self, finite: torch.Tensor) -> None:
        """``optimizer.step()``, which a fused optimizer skips on the device unless ``finite``.

        GradScaler's protocol for ``_step_supports_amp_scaling`` optimizers:
        ``found_inf`` (float32, 1.0 = skip) and ``grad_scale`` (None: the
        gradients are not scaled) are read by the fused kernels, which then
        leave parameters and state alone (Adam's ``step`` count is taken back).
        """
        optimizer, skipped = self.optimizer, ~finite
        optimizer.found_inf = skipped.to(torch.float32)
        optimizer.grad_scale = None
        try:
            optimizer.step()
        finally:  # nothing else (a later GradScaler step) may see them
            del optimizer.found_inf, optimizer.grad_scale
        self.nonfinite_skips.add_on_device(skipped)

    def clip_grads(self) -> Optional[torch.Tensor]:
        params = [p for p in self._params if p.grad is not None]
        if not params:
            return None
        return clip_grad_norm_(params, **self.grad_clip)

    # -- state ---------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        """Scaler, skip counts and a half-accumulated window's gradients (empty if none)."""
        state: Dict[str, Any] = {}
        if self.scaler is not None:
            state['scaler'] = self.scaler.state_dict()
        elif self._pending.get('scaler'):
            state['scaler'] = self._pending['scaler']
        # The counts are read back here (a checkpoint is a sync point anyway). Skips decided
        # on the device since the last log line are saved apart: the checkpoint's update
        # count still includes them, and the resumed run corrects it at its first log line.
        for key, counter in (('skipped_steps', self.overflow_skips),
                             ('skipped_nonfinite', self.nonfinite_skips)):
            count, unread = counter.value(), counter.unread()
            if count:
                state[key] = count
            if unread:
                state[f'{key}_unread'] = unread
        grads = {n: p.grad for n, p in zip(self._names, self._params) if p.grad is not None}
        if grads:  # resuming inside a window must see the same sums
            state['grads'] = grads
            if self._rank_grads is not None:
                state['grads_by_rank'] = self._rank_grads
            if self._window_finite is not None:
                state['window_finite'] = self._window_finite
        return state

    def gather_window(self) -> None:
        """Collect every rank's half-accumulated gradients for a checkpoint.

        A collective (every rank calls it, before a checkpoint is written):
        inside a window each rank holds its own un-reduced sums, which rank 0
        alone cannot save. Costs nothing outside a window or in one process.
        """
        self._rank_grads = None
        world_size = get_dist_info()[1]
        if world_size == 1 or self.cumulative_iters == 1 or not self.window_in_progress:
            return
        local = {n: p.grad.detach().cpu() for n, p in zip(self._names, self._params)
                 if p.grad is not None}
        gathered: List[Any] = [None] * world_size
        dist.all_gather_object(gathered, local)
        self._rank_grads = gathered

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        for key, counter in (('skipped_steps', self.overflow_skips),
                             ('skipped_nonfinite', self.nonfinite_skips)):
            counter.set(state.get(key, 0), state.get(f'{key}_unread', 0))
        if self.optimizer is None:  # resumed before the run started: applied in setup
            self._pending = dict(state)
            return
        if self.scaler is not None and state.get('scaler'):
            self.scaler.load_state_dict(state['scaler'])
        grads = self._grads_for_this_rank(state)
        unknown = sorted(set(grads) - set(self._names))
        if unknown:
            raise KeyError(f'the checkpoint holds accumulated gradients of parameters this '
                           f'model does not have: {unknown[:5]}')
        for name, param in zip(self._names, self._params):
            if name in grads:
                param.grad = grads[name].to(device=param.device, dtype=param.dtype).clone()
        if 'window_finite' in state:
            self._window_finite = state['window_finite'].to(self._params[0].device)

    def _grads_for_this_rank(self, state: Dict[str, Any]) -> Dict[str, torch.Tensor]:
        by_rank = state.get('grads_by_rank')
        if not by_rank:
            return state.get('grads') or {}
        rank, world_size = get_dist_info()
        if len(by_rank) == world_size:
            return by_rank[rank]
        if self.logger is not None:
            self.logger.warning(
                f'resuming inside an accumulation window on {world_size} process(es), saved '
                f'on {len(by_rank)}: each rank continues from the mean of the saved ranks\' '
                'gradients, so this one update is not bitwise the uninterrupted one')
        return {n: sum(g[n] for g in by_rank) / len(by_rank) for n in by_rank[0]}

