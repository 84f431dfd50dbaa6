"""The logged ``grad_norm`` of the updates that were applied, whoever decided the skips.

A skipped update's norm is inf or NaN (its gradients were), and it changed no
weights, so it is left out of the interval's mean: the host knows which
updates it skipped itself; one a fused optimizer skipped on the device is
known only by a flag there. The meter keeps references (no arithmetic, no
sync per update, like the log buffer) and sums them at the log line with one
read, dropping the flagged ones, so both kinds of skip log the same number.
"""

from typing import Any, Dict, List, Optional, Tuple

import torch


class GradNormMeter:
    """Norms since the last log line, each with its weight and an optional device skip flag."""

    def __init__(self) -> None:
        self._norms: List[torch.Tensor] = []
        self._weights: List[float] = []
        self._flags: List[Optional[torch.Tensor]] = []
        self._carried = (0.0, 0.0)  # (sum, count) restored from a checkpoint

    def add(self, norm: torch.Tensor, weight: float,
            skipped: Optional[torch.Tensor] = None) -> None:
        """Record an update's norm; ``skipped`` (a device bool flag) drops it if True."""
        self._norms.append(norm.detach())
        self._weights.append(weight)
        self._flags.append(skipped)

    def _totals(self) -> Tuple[float, float]:
        total, count = self._carried
        if not self._norms:
            return total, count
        norms = torch.stack([n.to(torch.float64).reshape(()) for n in self._norms])
        kept = torch.stack([torch.ones((), dtype=torch.bool, device=norms.device) if f is None
                            else ~f.to(norms.device).reshape(()) for f in self._flags])
        weights = torch.tensor(self._weights, dtype=torch.float64, device=norms.device)
        weights = torch.where(kept, weights, torch.zeros_like(weights))
        # A dropped norm may be NaN: where(), not a product, keeps it out of the sum.
        read = torch.stack([torch.where(kept, norms * weights, torch.zeros_like(norms)).sum(),
                            weights.sum()]).tolist()  # the one read, at a log line
        return total + read[0], count + read[1]

    def take(self) -> Dict[str, Tuple[float, float]]:
        """``{'grad_norm': (sum, count)}`` since the last call (empty if none applied); resets."""
        total, count = self._totals()
        self._norms, self._weights, self._flags = [], [], []
        self._carried = (0.0, 0.0)
        return {'grad_norm': (total, count)} if count else {}

    def state_dict(self) -> Dict[str, Any]:
        total, count = self._totals()
        self._norms, self._weights, self._flags = [], [], []
        self._carried = (total, count)
        return {'grad_norm': [total, count]} if count else {}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        total, count = state.get('grad_norm', (0.0, 0.0))
        self._norms, self._weights, self._flags = [], [], []
        self._carried = (float(total), float(count))
