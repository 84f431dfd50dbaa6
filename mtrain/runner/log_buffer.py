"""Logged values, kept as they come until a log line is due.

``update`` only appends references: a device tensor is not read (nothing
waits for the GPU) and no arithmetic runs per iteration. ``average`` reads
an interval's tensors back with one ``stack`` and one host transfer for all
keys, and takes the weighted means on the host (``math.fsum``, exact to the
last bit of float64). Memory is bounded: an interval's values are dropped
once averaged, and a key that nobody averages is folded into one entry every
``max_pending`` updates.
"""

import math
import operator
from typing import Any, Callable, Dict, List, Tuple, Union

import torch

Number = Union[int, float, torch.Tensor]
#: ``source() -> {key: (sum, count)}`` since its last call (then it starts again).
Source = Callable[[], Dict[str, Tuple[float, int]]]


class LogBuffer:
    """Values logged since the last ``average``, and the last averages.

    ``output`` holds what the last ``average`` produced plus whatever hooks put
    there (e.g. evaluation metrics); ``ready`` tells logger hooks to write it.
    """

    max_pending = 4096

    def __init__(self) -> None:
        self._values: Dict[str, List[Number]] = {}
        self._counts: Dict[str, List[int]] = {}
        self._sources: List[Source] = []
        self.output: Dict[str, Any] = {}
        self.ready = False

    def add_source(self, source: Source) -> None:
        """Poll ``source`` for host sums at every average (and drop them at ``clear``).

        For values known on the host every iteration (timings): the producer
        adds them to its own running sums, one float addition, instead of
        calling :meth:`update` per iteration.
        """
        self._sources.append(source)

    def update(self, values: Dict[str, Number], count: int = 1) -> None:
        """Record ``values`` (tensors or numbers), each weighted by ``count``."""
        for key, value in values.items():
            if isinstance(value, torch.Tensor) and (value.requires_grad or value.dim()):
                value = _scalar(key, value)
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
        tensors = [v for v in values if isinstance(v, torch.Tensor)]  # 0-dim (see update)
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
            reduce_fn: optional ``fn({key: (sum, count)}) -> {key: (sum, count)}``
                combining the sums and counts before dividing (over ranks:
                :func:`mtrain.utils.dist.sum_by_key`, one collective for all keys).
        """
        keys = list(self._values)
        sourced = [source() for source in self._sources]
        if not keys and not any(sourced):  # already averaged (all ranks agree: they all log)
            return
        values = self._read_back(keys)
        totals = {}
        for sums in sourced:
            totals.update(sums)
        for key in keys:
            weights = self._counts[key]
            if weights.count(weights[0]) == len(weights):  # the usual case: a fixed batch size
                total = math.fsum(values[key]) * weights[0]
            else:
                total = math.fsum(map(operator.mul, values[key], weights))
            totals[key] = (total, sum(weights))
        if reduce_fn is not None:
            totals = reduce_fn(totals)
        self.output.update((key, total / count) for key, (total, count) in totals.items())
        self.ready = True
        self._values.clear()
        self._counts.clear()

    def _read_back(self, keys: List[str]) -> Dict[str, List[Number]]:
        """Every key's values as host numbers, the tensors read in one transfer."""
        on_device = [k for k in keys if isinstance(self._values[k][0], torch.Tensor)]
        values = {k: self._values[k] for k in keys}
        if not on_device:
            return values
        flat = [v for k in on_device for v in self._values[k]]
        try:
            read = torch.stack(flat).tolist()  # the one host sync
        except (TypeError, RuntimeError):  # numbers among tensors, or tensors on two devices
            read = [float(v) for v in flat]
        start = 0
        for key in on_device:
            end = start + len(self._values[key])
            values[key], start = read[start:end], end
        return values

    def clear(self) -> None:
        self._values.clear()
        self._counts.clear()
        for source in self._sources:
            source()  # its sums since the last average are dropped too
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


def _scalar(key: str, value: torch.Tensor) -> torch.Tensor:
    """A detached 0-dim view of a one-element tensor (what ``average`` stacks)."""
    if value.numel() != 1:
        raise ValueError(f"logged value '{key}' has shape {tuple(value.shape)}; log scalars "
                         '(e.g. its .mean())')
    return value.detach().reshape(())
