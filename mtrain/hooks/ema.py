"""An exponential moving average of the weights, updated once per optimizer update."""

import os.path as osp
from typing import Any, Dict, Optional

import torch
from torch import nn

from ..registry import HOOKS
from ..step.torch_protocol import foreach_ema_update_
from ..utils.modules import strip_wrapper_prefix
from .hook import Hook


@HOOKS.register_module()
class EMAHook(Hook):
    """Keep ``ema = (1 - m) * ema + m * param`` for every parameter of the model.

    As mmcv 1.x's ``EMAHook``: every parameter is averaged (a frozen one's
    average stays its value, so unfreezing it mid-run just works), updates
    happen every ``interval``-th update, each with ``m = min(momentum **
    interval, (1 + t) / (warm_up + t))`` at the ``t``-th update (from 0), so
    the average follows the weights closely at first and, once warmed up, an
    update every ``interval`` steps decays as much as ``interval`` updates
    with ``momentum`` would. Unlike mmcv, ``t`` counts optimizer updates
    (``runner.num_updates``), not iterations: accumulation micro-steps and
    skipped fp16 steps leave the average alone (the same numbers as mmcv
    whenever each iteration steps). Buffers (BatchNorm statistics) are not
    averaged. The parameters are read from the model at each update, so one
    added or replaced mid-run starts its own average there.

    The averages live in the hook and go into checkpoints through
    :meth:`state_dict` (``hooks.EMAHook.ema``), so a resumed run continues
    them; the model's own weights in the checkpoint stay the trained ones.
    With ``evaluate_ema=True`` the averaged weights are swapped into the
    model for each evaluation (``before_evaluation``) and swapped back after
    it (``after_evaluation``). As in mmcv, the best checkpoint (``save_best``,
    written between the two) holds the averaged weights that were scored;
    its ``hooks.EMAHook.trained`` keeps the trained ones, which a resume from
    that file puts back.

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
        self._model: Optional[nn.Module] = None
        self._loaded: Dict[str, Any] = {}
        self._seen_updates = 0
        self._swapped = False

    def _params(self) -> Dict[str, nn.Parameter]:
        """The model's parameters, read now (not kept: they may be replaced mid-run)."""
        return dict(self._model.named_parameters())

    def before_run(self, runner) -> None:
        self._model = runner.model_wrapper.module
        loaded, self._loaded = self._loaded, {}
        start = loaded.get('ema') or (
            _load_averages(self.resume_from) if self.resume_from else {})
        params = self._params()
        self.ema = {n: _start_value(start, n, p).to(p.device, p.dtype, copy=True)
                    for n, p in params.items()}
        _copy_into(params, loaded.get('trained', {}))  # resumed from a best file: see below
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
        params = self._follow(self._params())
        # mmcv's ema.mul_(1 - m).add_(param, alpha=m), bitwise; two kernels per device/dtype
        foreach_ema_update_(list(self.ema.values()), [params[n].detach() for n in self.ema], m)

    def _follow(self, params: Dict[str, nn.Parameter]) -> Dict[str, nn.Parameter]:
        """Start an average for a parameter new to the model, drop a removed one's."""
        if params.keys() != self.ema.keys():
            self.ema = {n: self.ema[n] if n in self.ema else p.detach().clone()
                        for n, p in params.items()}
        return params

    def before_evaluation(self, runner) -> None:
        if self.evaluate_ema and not self._swapped:
            self._swap()

    def after_evaluation(self, runner) -> None:
        if self._swapped:
            self._swap()

    def _swap(self) -> None:
        with torch.no_grad():
            params = self._follow(self._params())
            for name, average in self.ema.items():
                param = params[name]
                kept = param.detach().clone()
                param.copy_(average)
                average.copy_(kept)
        self._swapped = not self._swapped

    def state_dict(self) -> Dict[str, Any]:
        if not self.ema:
            return {}
        if not self._swapped:
            return {'ema': _cpu(self.ema)}
        # Written between before_ and after_evaluation (the best checkpoint): the model
        # holds the averages, this hook the trained weights.
        return {'ema': _cpu(self._params()), 'trained': _cpu(self.ema)}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        if self._model is None:  # resumed before the run: used in before_run
            self._loaded = dict(state)
            return
        _copy_into(self.ema, state.get('ema', {}))
        _copy_into(self._params(), state.get('trained', {}))


def _cpu(tensors: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    return {n: t.detach().cpu() for n, t in tensors.items()}


def _copy_into(targets: Dict[str, torch.Tensor], values: Dict[str, torch.Tensor]) -> None:
    with torch.no_grad():
        for name, value in values.items():
            if name in targets:
                targets[name].copy_(value)


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
