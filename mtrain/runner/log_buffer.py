"""Logged values, kept as they come until a log line is due.

``update`` only appends references: a device tensor is not read (nothing
waits for the GPU) and no arithmetic runs per iteration. ``average`` turns an
interval's values into weighted means with a few tensor ops and one host
transfer for all keys. Memory is bounded: an interval's values are dropped
once averaged, and a key that nobody averages is folded into one entry every
``max_pending`` updates.
"""

import math
from typing import Any, Dict, List, Tuple, Union

import torch

Number = Union[int, float, torch.Tensor]


class LogBuffer:
    """Values logged since the last ``average``, and the last averages.

    ``output`` holds what the last ``average`` produced plus whatever hooks put
    there (e.g. evaluation metrics); ``ready`` tells logger hooks to write it.
    """

    max_pending = 4096

    def __init__(self) -> None:
        self._values: Dict[str, List[Number]] = {}
        self._counts: Dict[str, List[int]] = {}
        self.output: Dict[str, Any] = {}
        self.ready = False

    def update(self, values: Dict[str, Number], count: int = 1) -> None:
        """Record ``values`` (tensors or numbers), each weighted by ``count``."""
        for key, value in values.items():
            if isinstance(value, torch.Tensor) and value.requires_grad:
                value = value.detach()
            pending = self._values.get(key)
            if pending is None:
                self._values[key], self._counts[key] = [value], [count]
                continue
            pending.append(value)
            self._counts[key].append(count)
            if len(pending) >= self.max_pending:
                self._fold(key)

    def pending(self, key: str) -> List[Number]:
        """The values of ``key`` recorded since the last average (read-only use)."""
        return self._values.get(key, [])

    def _fold(self, key: str) -> None:
        total, count = self._weighted_sum(key)
        self._values[key], self._counts[key] = [total / count], [count]

    def _weighted_sum(self, key: str) -> Tuple[Union[float, torch.Tensor], int]:
        """The count-weighted sum of ``key``'s values and the total count.

        A float when every value is a number (host timings); else a float64
        tensor on the values' device, computed with one ``stack`` (no host sync).
        """
        values, counts = self._values[key], self._counts[key]
        tensors = [v.reshape(()) if v.dim() else v for v in values if isinstance(v, torch.Tensor)]
        numbers = math.fsum(float(v) * c for v, c in zip(values, counts)
                            if not isinstance(v, torch.Tensor))
        if not tensors:
            return numbers, sum(counts)
        weights = [c for v, c in zip(values, counts) if isinstance(v, torch.Tensor)]
        stacked = torch.stack(tensors).to(torch.float64)
        if all(w == weights[0] for w in weights):  # the usual case: a fixed batch size
            total = stacked.sum() * weights[0]
        else:
            total = (stacked * torch.tensor(weights, dtype=torch.float64,
                                            device=stacked.device)).sum()
        return (total + numbers if numbers else total), sum(counts)

    def average(self, reduce_fn=None) -> None:
        """Put the weighted mean of every key since the last average into ``output``.

        Calling it again before new updates leaves ``output`` as it is, so
        several logger hooks can each ask for the same interval's values.

        Args:
            reduce_fn: optional ``fn(tensor) -> tensor`` applied to the sums
                and counts before dividing (the all-reduce over ranks).
        """
        keys = list(self._values)
        if not keys:
            return
        sums, counts = zip(*(self._weighted_sum(k) for k in keys))
        is_tensor = [isinstance(s, torch.Tensor) for s in sums]
        device = next((s.device for s in sums if isinstance(s, torch.Tensor)), torch.device('cpu'))
        if reduce_fn is not None:  # every key goes through the all-reduce, in one tensor
            is_tensor = [True] * len(keys)
        on_device = [i for i, t in enumerate(is_tensor) if t]
        means = [s / c for s, c in zip(sums, counts)]  # numbers; tensors are replaced below
        if on_device:
            stacked = torch.stack([torch.as_tensor(sums[i], dtype=torch.float64, device=device)
                                   for i in on_device])
            totals = torch.tensor([counts[i] for i in on_device], dtype=torch.float64,
                                  device=device)
            if reduce_fn is not None:
                stacked, totals = reduce_fn(stacked), reduce_fn(totals)
            for i, mean in zip(on_device, (stacked / totals).tolist()):  # the one host sync
                means[i] = mean
        self.output.update(zip(keys, means))
        self.ready = True
        self._values.clear()
        self._counts.clear()

    def clear(self) -> None:
        self._values.clear()
        self._counts.clear()
        self.clear_output()

    def clear_output(self) -> None:
        self.output.clear()
        self.ready = False

    def state_dict(self) -> Dict[str, Any]:
        state: Dict[str, Any] = {'values': {}, 'counts': {}}
        for key in self._values:
            total, count = self._weighted_sum(key)
            state['values'][key] = torch.as_tensor(total / count, dtype=torch.float64).cpu()
            state['counts'][key] = count
        return state

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self._values = {k: [v] for k, v in state.get('values', {}).items()}
        self._counts = {k: [c] for k, c in state.get('counts', {}).items()}
