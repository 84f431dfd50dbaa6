"""Whether an update is skipped: one answer, known on the host or left on the device.

Two checks decide it: the window's losses were all finite on every rank
(``nan_policy=dict(action='skip')``, :class:`LossWatch`), and the gradients
held no inf/NaN (GradScaler's overflow check under fp16). Either is read back
to the host, or, for an optimizer that can skip itself on the device (a fused
one, see :mod:`.torch_protocol`), left there as a flag. :class:`Verdict`
is that answer in both forms; the caller asks :attr:`Verdict.on_device` once
instead of testing for ``bool`` or ``Tensor``.
"""

from typing import Any, Dict, Optional

import torch

from ..utils import all_ranks_true
from ..utils.dist import all_ranks_true_on_device


class Verdict:
    """Whether an update was (or must be) skipped.

    ``Verdict.host(skipped)``: the host knows. ``Verdict.device(flag)``: a
    0-dim bool tensor, True = skipped, that the host has not read (no sync);
    such a skip is counted on the device and learnt at the next log line.
    """

    __slots__ = ('skipped', 'flag')

    def __init__(self, skipped: Optional[bool], flag: Optional[torch.Tensor] = None) -> None:
        self.skipped = skipped  #: True/False when known on the host, None when on the device
        self.flag = flag  #: the device flag (True = skipped), None when known on the host

    @classmethod
    def host(cls, skipped: bool) -> 'Verdict':
        return SKIPPED if skipped else APPLIED

    @classmethod
    def device(cls, flag: torch.Tensor) -> 'Verdict':
        return cls(None, flag)

    @property
    def on_device(self) -> bool:
        return self.flag is not None

    def __repr__(self) -> str:
        return 'Verdict(on the device)' if self.on_device else f'Verdict(skipped={self.skipped})'


APPLIED = Verdict(False)
SKIPPED = Verdict(True)


class LossWatch:
    """Whether every loss back-propagated in the current window was finite.

    :meth:`observe` keeps a running AND on the device (no sync per
    iteration); :meth:`verdict` agrees over the ranks (every rank skips if
    any must: the weights stay equal) and starts the next window.
    """

    def __init__(self) -> None:
        self._finite: Optional[torch.Tensor] = None

    def observe(self, loss: torch.Tensor) -> None:
        finite = torch.isfinite(loss.detach())
        self._finite = finite if self._finite is None else self._finite & finite

    def verdict(self, on_device: bool) -> Verdict:
        """The window's verdict (skipped = some loss on some rank was not finite); resets."""
        finite, self._finite = self._finite, None
        if finite is None:
            return APPLIED  # no loss went back in this window
        if on_device:
            return Verdict.device(~all_ranks_true_on_device(finite))
        return Verdict.host(not all_ranks_true(finite))

    def save(self) -> Optional[torch.Tensor]:
        """The record so far, for :meth:`restore` (a micro-batch attempt that ran out of memory)."""
        return self._finite

    def restore(self, saved: Optional[torch.Tensor]) -> None:
        self._finite = saved

    def state_dict(self) -> Dict[str, Any]:
        return {} if self._finite is None else {'window_finite': self._finite}

    def load_state_dict(self, state: Dict[str, Any], device: torch.device) -> None:
        finite = state.get('window_finite')
        self._finite = None if finite is None else finite.to(device)
