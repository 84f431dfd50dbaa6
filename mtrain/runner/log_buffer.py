"""Logged values, kept as they come until a log line is due.

``update`` only appends references: a device tensor is not read (nothing
waits for the GPU) and no arithmetic runs per iteration. ``average_interval``
(each log line) reads an interval's tensors back with one ``stack`` and one
host transfer for all keys, and takes the weighted means on the host
(``math.fsum``, exact to the last bit of float64). The host values then join
mmcv's history (``val_history`` / ``n_history``, what ``average(n)`` of mmcv
1.7.2 averages over, emptied by ``clear``). Memory is bounded: the history
keeps each key's latest ``max_pending`` values, and a key that nobody averages
is folded into one entry every ``max_pending`` updates. A hook that must see
every value of a key (the NaN guard, every loss) ``watch``-es it instead of
keeping its own copies: it is shown the values as they leave, at an average
already read back to the host.
"""

import math
import operator
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import torch

Number = Union[int, float, torch.Tensor]
#: ``source() -> {key: (sum, count)}`` since its last call (then it starts again).
Source = Callable[[], Dict[str, Tuple[float, int]]]
#: ``watcher(values, total)``: a key's values as they leave the buffer (see ``watch``).
Watcher = Callable[[List[Number], Union[float, None]], None]
#: Marks a key's latest-``n`` total among the interval totals (one collective for both).
_LATEST = '\0latest:'


class LogBuffer:
    """Values logged since the last ``average``, their history, and the last averages.

    mmcv 1.7.2's API means what it meant there: ``update(vars, count)``,
    ``val_history`` / ``n_history`` (every value and count since ``clear``),
    ``average(n)`` (the weighted mean of each key's latest ``n`` values, all
    with ``n=0``), ``output`` (what the last average produced plus whatever
    hooks put there, e.g. evaluation metrics), ``ready`` (tells logger hooks to
    write it), ``clear`` and ``clear_output``. mtrain's loggers call
    ``average_interval`` (the values since the last line, reduced over ranks).
    """

    max_pending = 4096

    def __init__(self) -> None:
        self._values: Dict[str, List[Number]] = {}
        self._counts: Dict[str, List[int]] = {}
        self._sources: List[Source] = []
        self._watchers: Dict[str, List[Watcher]] = {}
        self._shown: Dict[str, int] = {}  # leading values of a key watchers have seen (folds)
        # Host values averaged since clear(), oldest first (val_history / n_history).
        self._past: Dict[str, List[float]] = {}
        self._past_n: Dict[str, List[int]] = {}
        self._sourced: set = set()  # keys that come from a source (a mean per interval)
        self.output: Dict[str, Any] = {}
        self.ready = False
        #: The values came from a checkpoint (:meth:`load_state_dict`, which a resume
        #: calls) and no line has averaged them yet: the loggers keep them for the
        #: resumed run's first line instead of inferring a resume from ``runner.iter``.
        self.restored = False

    def add_source(self, source: Source) -> None:
        """Poll ``source`` for host sums at every average (and drop them at ``clear``).

        For values known on the host every iteration (timings): the producer
        adds them to its own running sums, one float addition, instead of
        calling :meth:`update` per iteration.
        """
        self._sources.append(source)

    def watch(self, key: str, watcher: Watcher) -> None:
        """Show ``watcher`` every value of ``key`` once, as it leaves the buffer.

        At :meth:`average`, ``watcher(values, total)`` gets this process's
        values as host numbers (read back for the log line anyway, so looking
        costs nothing) and ``total``, their sum over all ranks. At :meth:`clear`
        and when an unaveraged key is folded, ``watcher(values, None)`` gets them
        as logged (device tensors). :meth:`pending` shows those not yet shown.
        """
        self._watchers.setdefault(key, []).append(watcher)

    def _show(self, key: str, values: List[Number], total: Union[float, None] = None) -> None:
        """Show watchers ``values`` but those they saw before (a folded entry)."""
        new = values[self._shown.pop(key, 0):]
        for watcher in self._watchers.get(key, ()):
            watcher(new, total)

    def update(self, values: Dict[str, Number], count: int = 1) -> None:
        """Record ``values`` (tensors or numbers), each weighted by ``count``."""
        values_by_key, counts_by_key = self._values, self._counts
        for key, value in values.items():
            if isinstance(value, torch.Tensor) and (value.requires_grad or value.dim()):
                value = _scalar(key, value)
            pending = values_by_key.get(key)
            if pending is None:
                values_by_key[key], counts_by_key[key] = [value], [count]
                continue
            pending.append(value)
            counts_by_key[key].append(count)
            if len(pending) >= self.max_pending:
                self._fold(key)

    def pending(self, key: str) -> List[Number]:
        """The values of ``key`` recorded since the last average (read-only use)."""
        return self._values.get(key, [])

    def _fold(self, key: str) -> None:
        if key in self._watchers:
            self._show(key, self._values[key])
            self._shown[key] = 1
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

    def average(self, n: Union[int, Callable, None] = 0, reduce_fn=None) -> None:
        """mmcv's ``average(n)``: each key's weighted mean over its last ``n`` values.

        ``n=0`` (the default): over every value since :meth:`clear`, as mmcv
        1.7.2. The pending values move into :attr:`val_history` (watchers see
        them leave). ``reduce_fn`` combines the window's ``(sum, count)`` over
        ranks before dividing, as in :meth:`average_interval`. A callable or
        None as the first argument is the older spelling of
        :meth:`average_interval`.
        """
        if n is None or callable(n):
            return self.average_interval(n)
        assert n >= 0, f'average(n) takes the number of latest values, not {n}'  # mmcv's check
        self._take(reduce_fn)
        totals = {key: _weighted(values[-n:], self._past_n[key][-n:])
                  for key, values in self._past.items()}
        if reduce_fn is not None:
            totals = reduce_fn(totals)
        self.output.update((key, total / count) for key, (total, count) in totals.items())
        self.ready = True

    def average_interval(self, reduce_fn=None, n: Optional[int] = None) -> None:
        """Put each key's weighted mean into ``output``: what mtrain's logger hooks call.

        With ``n`` (the logger's interval), as mmcv 1.7.2's ``average(n)`` at a
        log line: every key in the history, whether logged since the last
        line or not, is averaged over its latest ``n`` values, so a loss a
        model logs only on some iterations repeats its last value as mmcv's
        line does. Without ``n``: the values since the last average. A
        timing (and the step's ``grad_norm`` source) is the interval's mean
        either way. Calling it again before new updates leaves ``output`` as
        it is, so several logger hooks can each ask for the same line's values.

        Args:
            reduce_fn: optional ``fn({key: (sum, count)}) -> {key: (sum, count)}``
                combining the sums and counts before dividing (over ranks:
                :func:`mtrain.utils.dist.sum_by_key`, one collective for all keys).
            n: average each key's latest ``n`` values (see above); None: the interval's.
        """
        totals = self._take(reduce_fn, n)
        if totals is None:  # already averaged (all ranks agree: they all log)
            return
        latest = {key[len(_LATEST):]: value for key, value in totals.items()
                  if key.startswith(_LATEST)}
        for key, (total, count) in totals.items():
            if not key.startswith(_LATEST):
                total, count = latest.pop(key, (total, count))
                self.output[key] = total / count
        self.output.update((key, total / count) for key, (total, count) in latest.items())
        self.ready = True

    def _take(self, reduce_fn=None, n: Optional[int] = None
              ) -> Optional[Dict[str, Tuple[float, int]]]:
        """Move the values since the last average into the history; their (reduced) totals.

        The tensors are read back with one ``stack`` and one host transfer for
        all keys; watchers are shown the values with their all-rank total.
        With ``n``, the totals also hold ``_LATEST + key``: the latest ``n``
        values of each key whose interval is not exactly those (reduced in
        the same collective). None when nothing was logged since.
        """
        self.restored = False
        keys = list(self._values)
        sourced = [source() for source in self._sources]
        if not keys and not any(sourced):
            return None
        values = self._read_back(keys)
        totals = {}
        for sums in sourced:
            totals.update(sums)
        for key, (total, count) in list(totals.items()):
            self._sourced.add(key)
            if count:  # a timing's interval: one entry of the history
                self._remember(key, [total / count], [count])
        for key in keys:
            totals[key] = _weighted(values[key], self._counts[key])
            self._remember(key, values[key], self._counts[key])
        if n:
            for key, past in self._past.items():
                if key not in self._sourced and len(values.get(key, ())) != n:
                    totals[_LATEST + key] = _weighted(past[-n:], self._past_n[key][-n:])
        if reduce_fn is not None:
            totals = reduce_fn(totals)
        for key in keys:
            if key in self._watchers:
                self._show(key, values[key], totals[key][0])
        self._values.clear()
        self._counts.clear()
        self._shown.clear()
        return totals

    def _remember(self, key: str, values: List[float], counts: List[int]) -> None:
        past, past_n = self._past.setdefault(key, []), self._past_n.setdefault(key, [])
        past += values
        past_n += counts
        if len(past) > self.max_pending:  # bounded: the latest max_pending values
            del past[:-self.max_pending], past_n[:-self.max_pending]

    @property
    def val_history(self) -> 'OrderedDict[str, List[float]]':
        """mmcv's: every key's values since :meth:`clear`, oldest first (host numbers).

        The values not yet averaged are read back to the host for it (a host
        sync, at the reader's request). At most ``max_pending`` per key are
        kept; a timing contributes one value per log interval (its mean).
        """
        pending = self._read_back(list(self._values))
        return OrderedDict((key, self._past.get(key, []) + list(pending.get(key, [])))
                           for key in self._history_keys())

    @property
    def n_history(self) -> 'OrderedDict[str, List[int]]':
        """mmcv's: the count (``num_samples``) of each value in :attr:`val_history`."""
        return OrderedDict((key, self._past_n.get(key, []) + self._counts.get(key, []))
                           for key in self._history_keys())

    def _history_keys(self) -> List[str]:
        return list(dict.fromkeys([*self._past, *self._values]))

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
        self.restored = False
        for key in self._watchers:
            if key in self._values:
                self._show(key, self._values[key])
        self._shown.clear()
        self._values.clear()
        self._counts.clear()
        self._past.clear()
        self._past_n.clear()
        for source in self._sources:
            source()  # its sums since the last average are dropped too
        self.clear_output()

    def clear_output(self) -> None:
        self.output.clear()
        self.ready = False

    def state_dict(self) -> Dict[str, Any]:
        """The values not yet averaged and the history, one number per value (host float64).

        Each value is kept apart (not folded into one mean): a line averages
        each key's latest ``n`` values, so a resumed run must count them as
        the uninterrupted one does.
        """
        pending = self._read_back(list(self._values))
        return {'values': {k: _floats(v) for k, v in pending.items()},
                'counts': {k: list(c) for k, c in self._counts.items()},
                'history': {k: _floats(v) for k, v in self._past.items()},
                'history_counts': {k: list(c) for k, c in self._past_n.items()},
                'sourced': sorted(self._sourced)}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s values (also an older checkpoint's one mean per key)."""
        values, counts = state.get('values', {}), state.get('counts', {})
        self._values = {k: _host_list(v) for k, v in values.items()}
        self._counts = {k: [c] if isinstance(c, int) else list(c) for k, c in counts.items()}
        self._shown = {k: len(v) for k, v in self._values.items()}  # seen before it was written
        self._past = {k: _host_list(v) for k, v in state.get('history', {}).items()}
        self._past_n = {k: list(c) for k, c in state.get('history_counts', {}).items()}
        self._sourced = set(state.get('sourced', ()))
        self.restored = True


def _floats(values: List[Number]) -> torch.Tensor:
    return torch.tensor([float(v) for v in values], dtype=torch.float64)


def _host_list(values: Any) -> List[float]:
    """A saved key's values as host floats (a 0-d tensor: an older checkpoint's mean)."""
    return [float(v) for v in torch.as_tensor(values, dtype=torch.float64).reshape(-1)]


def _weighted(values: List[float], counts: List[int]) -> Tuple[float, int]:
    """``(sum of value * count, sum of counts)`` of host numbers, exactly rounded."""
    if counts.count(counts[0]) == len(counts):  # the usual case: a fixed batch size
        return _fsum(values) * counts[0], counts[0] * len(counts)
    return _fsum(list(map(operator.mul, values, counts))), sum(counts)


def _fsum(values: List[float]) -> float:
    """``math.fsum``, or a plain sum where fsum refuses (``inf - inf``, overflow): NaN/inf."""
    try:
        return math.fsum(values)
    except (ValueError, OverflowError):
        return sum(values)


def _scalar(key: str, value: torch.Tensor) -> torch.Tensor:
    """A detached 0-dim view of a one-element tensor (what ``average`` stacks)."""
    if value.numel() != 1:
        raise ValueError(f"logged value '{key}' has shape {tuple(value.shape)}; log scalars "
                         '(e.g. its .mean())')
    return value.detach().reshape(())
