"""Every private piece of torch that mtrain relies on, in one place.

Each is pinned by ``tests/step/test_torch_protocol.py``, which fails by name
when a torch release changes it; nothing else in mtrain touches these names.

- ``optimizer._step_supports_amp_scaling``: torch's fused ``SGD``, ``Adam`` and
  ``AdamW`` (``fused=True``) say they take GradScaler's verdict on the device.
- ``optimizer.found_inf`` / ``optimizer.grad_scale``: the two attributes
  GradScaler sets on such an optimizer around its ``step()`` (its documented
  replacement for the ``grad_scaler=`` keyword): the fused kernels skip the
  update when ``found_inf`` is 1.0 and divide by ``grad_scale`` unless it is
  None. mtrain sets them itself to skip a non-finite loss's update on the
  device, and reads GradScaler's from a step post-hook.
- ``torch._foreach_mul_`` / ``torch._foreach_add_(..., alpha=)``: the EMA
  update in two kernels per device and dtype, the same two ops mmcv 1.x runs
  per tensor (torch.optim is built on the same ``_foreach`` ops); per-tensor
  ``mul_`` / ``add_`` otherwise.
"""

from typing import List, Optional

import torch


def supports_device_skip(optimizer: torch.optim.Optimizer) -> bool:
    """Whether ``optimizer.step()`` can skip itself on the device (``found_inf``)."""
    return bool(getattr(optimizer, '_step_supports_amp_scaling', False))


def step_unless_flagged(optimizer: torch.optim.Optimizer, skip: torch.Tensor) -> None:
    """``optimizer.step()``, which the fused kernels skip where ``skip`` (a bool tensor) holds.

    The gradients are not scaled (``grad_scale=None``); the kernels leave the
    parameters and the state alone on a skip (Adam's ``step`` count is taken
    back). The attributes are removed afterwards, so a later GradScaler step
    never sees them.
    """
    optimizer.found_inf = skip.to(torch.float32)
    optimizer.grad_scale = None
    try:
        optimizer.step()
    finally:
        del optimizer.found_inf, optimizer.grad_scale


def scaler_flag(optimizer: torch.optim.Optimizer) -> Optional[torch.Tensor]:
    """In a step post-hook: GradScaler's skip flag handed to a fused step (None if it handed none).

    A bool tensor on the device: True where the kernels skipped the update.
    """
    found_inf = getattr(optimizer, 'found_inf', None)
    return None if found_inf is None else found_inf == 1  # (what the kernels test)


def foreach_ema_update_(averages: List[torch.Tensor], values: List[torch.Tensor],
                        momentum: float) -> None:
    """mmcv 1.x's EMA update, ``average.mul_(1 - momentum).add_(value, alpha=momentum)``, in place.

    Those two ops, not a lerp (``average + m * (value - average)``), which
    rounds differently: mmcv's averaged weights are matched bit for bit.
    """
    mul, add = getattr(torch, '_foreach_mul_', None), getattr(torch, '_foreach_add_', None)
    if mul is not None and add is not None:
        mul(averages, 1 - momentum)
        add(averages, values, alpha=momentum)
        return
    for average, value in zip(averages, values):  # (a torch without them: two kernels each)
        average.mul_(1 - momentum).add_(value, alpha=momentum)
