"""Running sums of logged values that stay on the device until a log line is due.

``update`` adds ``value * count`` to a per-key sum without reading the value
(a device tensor stays on the device, so nothing waits for the GPU); only
``average`` reads them, once per log interval, with one host transfer for all
keys. Memory is one scalar per key however long the run.
"""

from typing import Any, Dict, Union

import torch

Number = Union[int, float, torch.Tensor]


class LogBuffer:
    """Sums and counts of logged values since the last ``clear``.

    ``output`` holds what the last ``average`` produced plus whatever hooks put
    there (e.g. evaluation metrics); ``ready`` tells logger hooks to write it.
    """

    def __init__(self) -> None:
        self._sums: Dict[str, Number] = {}
        self._counts: Dict[str, int] = {}
        self.output: Dict[str, Any] = {}
        self.ready = False

    def update(self, values: Dict[str, Number], count: int = 1) -> None:
        """Add ``values`` (tensors or numbers), each weighted by ``count``."""
        for key, value in values.items():
            if isinstance(value, torch.Tensor):
                value = value.detach()
            weighted = value * count
            if key in self._sums:
                self._sums[key] = self._sums[key] + weighted
                self._counts[key] += count
            else:
                self._sums[key] = weighted
                self._counts[key] = count

    def average(self, reduce_fn=None) -> None:
        """Put the mean of every key since the last average into ``output``.

        Calling it again before new updates leaves ``output`` as it is, so
        several logger hooks can each ask for the same interval's values.

        Args:
            reduce_fn: optional ``fn(tensor) -> tensor`` applied to the stacked
                sums and counts before dividing (the all-reduce over ranks).
        """
        keys = list(self._sums)
        if not keys:
            return
        sums = self._stack(keys)
        counts = torch.tensor([self._counts[k] for k in keys], dtype=torch.float64,
                              device=sums.device)
        if reduce_fn is not None:
            sums, counts = reduce_fn(sums), reduce_fn(counts)
        means = (sums / counts).tolist()  # the one host sync per log interval
        self.output.update(zip(keys, means))
        self.ready = True
        # Start the next interval afresh (mmcv averaged the last `interval` values).
        self._sums.clear()
        self._counts.clear()

    def _stack(self, keys) -> torch.Tensor:
        tensors = [v for v in self._sums.values() if isinstance(v, torch.Tensor)]
        device = tensors[0].device if tensors else torch.device('cpu')
        return torch.stack([
            torch.as_tensor(self._sums[k], dtype=torch.float64, device=device).reshape(())
            if not isinstance(self._sums[k], torch.Tensor)
            else self._sums[k].to(device=device, dtype=torch.float64).reshape(())
            for k in keys])

    def clear(self) -> None:
        self._sums.clear()
        self._counts.clear()
        self.clear_output()

    def clear_output(self) -> None:
        self.output.clear()
        self.ready = False

    def state_dict(self) -> Dict[str, Any]:
        return {'sums': {k: torch.as_tensor(v).detach().cpu().clone() for k, v in self._sums.items()},
                'counts': dict(self._counts)}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self._sums = dict(state.get('sums', {}))
        self._counts = dict(state.get('counts', {}))
