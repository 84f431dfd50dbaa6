"""An exponential moving average of the weights, updated once per optimizer update."""

import os.path as osp
from typing import Any, Dict, Optional

import torch

from ..registry import HOOKS
from ..utils.modules import strip_wrapper_prefix
from .hook import Hook


@HOOKS.register_module()
class EMAHook(Hook):
    """Keep ``ema = (1 - m) * ema + m * param`` for every trainable parameter.

    As mmcv 1.x's ``EMAHook``: updates happen every ``interval``-th update,
    each with ``m = min(momentum ** interval, (1 + t) / (warm_up + t))`` at
    the ``t``-th update (from 0), so the average follows the weights closely
    at first and, once warmed up, an update every ``interval`` steps decays
    as much as ``interval`` updates with ``momentum`` would. Unlike mmcv,
    ``t`` counts optimizer updates (``runner.num_updates``), not iterations:
    accumulation micro-steps and skipped fp16 steps leave the average alone
    (the same numbers as mmcv whenever each iteration steps). Buffers
    (BatchNorm statistics) are not averaged.

    The averages live in the hook and go into checkpoints through
    :meth:`state_dict` (``hooks.EMAHook.ema``), so a resumed run continues
    them; the model's own weights in the checkpoint stay the trained ones.
    With ``evaluate_ema=True`` the averaged weights are swapped into the
    model for each evaluation (``before_evaluation``) and swapped back after
    it (``after_evaluation``).

    Config::

        custom_hooks = [dict(type='EMAHook', momentum=0.0002, interval=1, warm_up=100)]

    Args:
        momentum: weight of the current parameters in each update (mmcv's
            convention: small means a long average). Default: 0.0002.
        interval: update the average every this many optimizer updates.
        warm_up: updates over which ``m`` decays towards ``momentum``; any
            number >= 0, as mmcv (with 0, ``m`` is ``momentum ** interval``
            from the first update on, where mmcv divides by zero).
        resume_from: a checkpoint whose averages start the average: mtrain's
            (``hooks.EMAHook.ema``), mmcv 1.x's (the ``ema_<name>`` buffers
            its EMAHook adds to the model, dots as underscores), or failing
            both its model weights. (mmcv resumed the whole run here; in
            mtrain use the top-level ``resume_from``, which restores the
            averages too.)
        evaluate_ema: evaluate with the averaged weights.
    """

    # After the OptimizerHook (ABOVE_NORMAL, 40) has stepped and before the CheckpointHook
    # (NORMAL, 50) saves, so a checkpoint holds the average of exactly its updates.
    priority = 45

    def __init__(self, momentum: float = 0.0002, interval: int = 1, warm_up: float = 100,
                 resume_from: Optional[str] = None, evaluate_ema: bool = True) -> None:
        if not 0 < momentum < 1:
            raise ValueError(f'EMAHook momentum must be in (0, 1), got {momentum!r}')
        if not isinstance(interval, int) or interval <= 0:
            raise ValueError(f'EMAHook interval must be a positive integer, got {interval!r}')
        if isinstance(warm_up, bool) or not isinstance(warm_up, (int, float)) or warm_up < 0:
            raise ValueError(f'EMAHook warm_up must be a number >= 0, got {warm_up!r}')
        self.momentum = momentum ** interval  # as mmcv: the decay of `interval` updates
        self.interval = interval
        self.warm_up = warm_up
        self.resume_from = resume_from
        self.evaluate_ema = evaluate_ema
        self.ema: Dict[str, torch.Tensor] = {}
        self._params: Dict[str, torch.nn.Parameter] = {}
        self._loaded: Dict[str, torch.Tensor] = {}
        self._seen_updates = 0
        self._swapped = False

    def before_run(self, runner) -> None:
        self._params = {n: p for n, p in runner.model_wrapper.module.named_parameters()
                        if p.requires_grad}
        start = self._loaded or (_load_averages(self.resume_from) if self.resume_from else {})
        self.ema = {n: _start_value(start, n, p).to(p.device, p.dtype, copy=True)
                    for n, p in self._params.items()}
        self._loaded = {}
        self._seen_updates = runner.num_updates

    def before_train_iter(self, runner) -> None:
        # Read here, not only after the last update: a step a fused optimizer skipped on
        # the device is taken off num_updates at a log line, after this hook's turn.
        self._seen_updates = runner.num_updates

    def after_train_iter(self, runner) -> None:
        if runner.num_updates == self._seen_updates:
            return  # no optimizer update this iteration
        self._seen_updates = runner.num_updates
        t = runner.num_updates - 1
        if t % self.interval != 0:
            return
        m = self.momentum if self.warm_up + t == 0 else min(
            self.momentum, (1 + t) / (self.warm_up + t))
        averages = list(self.ema.values())
        params = [self._params[n].detach() for n in self.ema]
        # ema += m * (param - ema) for all tensors in one fused kernel per device/dtype
        # (torch's foreach ops are underscored but stable; torch.optim is built on them).
        torch._foreach_lerp_(averages, params, m)

    def before_evaluation(self, runner) -> None:
        if self.evaluate_ema and not self._swapped:
            self._swap()

    def after_evaluation(self, runner) -> None:
        if self._swapped:
            self._swap()

    def _swap(self) -> None:
        with torch.no_grad():
            for name, average in self.ema.items():
                param = self._params[name]
                kept = param.detach().clone()
                param.copy_(average)
                average.copy_(kept)
        self._swapped = not self._swapped

    def state_dict(self) -> Dict[str, Any]:
        if not self.ema:
            return {}
        assert not self._swapped, '[EMAHook] checkpoint requested while EMA weights are swapped in'
        return {'ema': {n: t.detach().cpu() for n, t in self.ema.items()}}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        averages = state.get('ema', {})
        if self._params:  # the run has started: copy into place
            for name, value in averages.items():
                if name in self.ema:
                    self.ema[name].copy_(value)
        else:  # resumed before the run: used in before_run
            self._loaded = dict(averages)


def mmcv_buffer_name(param_name: str) -> str:
    """The buffer mmcv 1.x's EMAHook keeps the average of ``param_name`` in."""
    return f"ema_{param_name.replace('.', '_')}"


def _start_value(start: Dict[str, torch.Tensor], name: str,
                 param: torch.Tensor) -> torch.Tensor:
    """Where the average of ``name`` starts: mtrain's or mmcv's stored average, else the weights."""
    for key in (mmcv_buffer_name(name), name):
        if key in start:
            return start[key]
    return param.detach()


def _load_averages(path: str) -> Dict[str, torch.Tensor]:
    """The averages stored in checkpoint ``path``; else its state dict (``ema_*`` or weights)."""
    if not osp.isfile(path):
        raise FileNotFoundError(f'EMAHook resume_from={path!r} does not exist; give a checkpoint '
                                'written by mtrain, or remove resume_from')
    ckpt = torch.load(path, map_location='cpu', weights_only=True)
    state = ckpt.get('hooks', {}).get('EMAHook', {}).get('ema')
    if state is None:
        state = ckpt.get('state_dict', ckpt)
        state = strip_wrapper_prefix(state)
    return state
