"""The update itself: clip, step (plainly, through the loss scaler, or skipping on the device).

Everything is read from ``optimizer.param_groups`` at the step, never
collected before the run: a parameter unfrozen mid-run (a fine-tuning
schedule, an unfreeze hook), a param group added, or an optimizer state
loaded by a rollback are all seen at the next update.
"""

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional

import torch
from torch import nn
from torch.nn.utils import clip_grad_norm_

from .torch_protocol import scaler_flag, step_unless_flagged, supports_device_skip
from .verdict import APPLIED, SKIPPED, Verdict
from .window_grads import optimizer_params


@dataclass(frozen=True)
class UpdateResult:
    """What :meth:`OptimStep.update` did."""

    verdict: Verdict  #: skipped or applied, known on the host or left on the device
    grad_norm: Optional[torch.Tensor] = None  #: total norm before clipping (with grad_clip)
    skipped_because: Optional[str] = None  #: why the host skipped the update

    @property
    def stepped(self) -> bool:
        """Applied, as far as the host knows (a device skip is learnt at the next log line)."""
        return self.verdict.skipped is not True

    @property
    def deferred(self) -> bool:
        """The verdict is on the device: ``take_device_skips`` tells at the next read."""
        return self.verdict.on_device


STEPPED = UpdateResult(APPLIED)  #: the common result (applied, no norm), made once


def params_with_grads(params: Iterable[nn.Parameter]) -> List[nn.Parameter]:
    """Those of ``params`` that take part in the update: trainable and holding a gradient."""
    return [p for p in params if p.requires_grad and p.grad is not None]


def clip_by_norm(params: Iterable[nn.Parameter],
               grad_clip: Dict[str, Any]) -> Optional[torch.Tensor]:
    """``clip_grad_norm_`` over ``params`` that have a gradient, in the order given.

    The order is the caller's to choose and it matters to the last bit (the
    norm is a sum): mmcv 1.x clips ``runner.model.parameters()``, mmengine
    its optimizer's parameters one group per parameter (see
    :func:`params_in_model_order`). Returns the norm before clipping, or None
    when no parameter has a gradient.
    """
    params = params_with_grads(params)
    return clip_grad_norm_(params, **grad_clip) if params else None


def params_in_model_order(optimizer: torch.optim.Optimizer,
                          model: Optional[nn.Module]) -> List[nn.Parameter]:
    """The optimizer's parameters in the model's order, whatever its group layout.

    mmengine builds one group per parameter by walking the model, so its
    clip sums in this order; merging groups of equal settings must not
    change it. Parameters the model does not hold come last, in group order.
    """
    held = {id(p): p for p in optimizer_params(optimizer)}
    ordered = [] if model is None else [p for p in model.parameters() if held.pop(id(p), None)
                                        is not None]
    return ordered + list(held.values())


def step_plain(optimizer: torch.optim.Optimizer, verdict: Verdict) -> None:
    """``optimizer.step()`` unless the host verdict skips it (a device one goes to the kernels)."""
    if verdict.on_device:
        step_unless_flagged(optimizer, verdict.flag)
    elif not verdict.skipped:
        optimizer.step()


class ScaledStep:
    """``torch.amp.GradScaler`` around the step, telling whether it skipped it.

    GradScaler skips ``optimizer.step()`` on inf/NaN gradients and says so
    nowhere public; a step post-hook is the public way to know. A fused
    optimizer is stepped either way, handed GradScaler's flag on the device
    (:func:`~.torch_protocol.scaler_flag`): the verdict then stays there.

    Args:
        scaler_args: ``GradScaler`` keyword arguments.
        static_scale: a fixed scale, set back after every step (None: dynamic).
    """

    def __init__(self, scaler_args: Dict[str, Any], static_scale: Optional[float]) -> None:
        self.scaler_args, self.static_scale = scaler_args, static_scale
        self.scaler: Optional[torch.amp.GradScaler] = None
        self.given = False  # the scaler was set from outside: keep it (see use)
        self._made_for: Optional[str] = None  # the device type the scaler was made for
        self._hooked: Optional[torch.optim.Optimizer] = None
        self._handle = None
        self._stepped = False
        self._flag: Optional[torch.Tensor] = None

    def start(self, device: torch.device) -> None:
        """The scaler for ``device``: the one already made (or given) if it is for that device.

        One made for another device (read before the run, see
        :meth:`made_early`) hands its state (scale, growth tracker) to the new
        one; one given by :meth:`use` is used as it is.
        """
        early = self.scaler
        if self.given or (early is not None and self._made_for == device.type):
            return
        self._made_for = device.type
        self.scaler = torch.amp.GradScaler(device.type, **self.scaler_args)
        if early is not None and early.state_dict():
            self.scaler.load_state_dict(early.state_dict())

    def made_early(self) -> torch.amp.GradScaler:
        """The scaler, made now for the likely device if the run has not made it yet.

        mmcv 1.x makes its scaler in the hook's ``__init__``; code may read it
        (or load a state into it) before the run. :meth:`start` keeps it, or
        moves its state to the run's device.
        """
        if self.scaler is None:
            self._made_for = 'cuda' if torch.cuda.is_available() else 'cpu'
            self.scaler = torch.amp.GradScaler(self._made_for, **self.scaler_args)
        return self.scaler

    def use(self, scaler: torch.amp.GradScaler) -> None:
        """Step with ``scaler`` (a 1.x hook that sets ``self.loss_scaler`` itself)."""
        self.scaler, self.given = scaler, True

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle, self._hooked = None, None

    def _watch(self, optimizer: torch.optim.Optimizer) -> None:
        """Hook the optimizer stepped now (read each update: it may have been replaced)."""
        if self._hooked is not optimizer:
            self.stop()
            self._handle = optimizer.register_step_post_hook(self._mark_stepped)
            self._hooked = optimizer

    def _mark_stepped(self, optimizer, args, kwargs) -> None:
        self._stepped = True
        self._flag = scaler_flag(optimizer)

    def step(self, optimizer: torch.optim.Optimizer) -> Verdict:
        """GradScaler's step and scale update; what became of the update."""
        self._watch(optimizer)
        self._stepped, self._flag = False, None
        fresh = supports_device_skip(optimizer) and not optimizer.state  # creates the state
        self.scaler.step(optimizer)  # skips optimizer.step() on inf/NaN gradients
        self.scaler.update(self.static_scale)  # a static scale is set back every step
        flag, self._flag = self._flag, None
        if flag is None:
            return APPLIED if self._stepped else SKIPPED
        if fresh and optimizer.state and bool(flag):  # (one read, first steps only)
            optimizer.state.clear()  # fused SGD's new momentum: uninitialised memory
        return Verdict.device(flag)
