"""Counting skipped updates where they are decided, on the host or on the device."""

from typing import Any, Dict, Union

import torch


class SkipCounter:
    """Skipped updates of one kind, counted where they are decided; read only when asked.

    ``total`` counts every skip: an int until :meth:`place` makes it an int64
    0-dim tensor on the parameters' device, which a device-side verdict adds
    to without a host sync. ``known`` is how many of them the host has been
    told of: skips it decided itself, or read back by :meth:`take_new`.
    """

    def __init__(self) -> None:
        self.total: Union[int, torch.Tensor] = 0
        self.known = 0
        self._unread = False  # total may hold skips the host has not read yet

    def place(self, device: torch.device) -> None:
        self.total = torch.tensor(int(self.total), dtype=torch.int64, device=device)

    def set(self, count: int, unread: int = 0) -> None:
        """Start from ``count`` skips, the last ``unread`` of them not yet known to the host."""
        self.known, self._unread = count - unread, unread > 0
        if isinstance(self.total, torch.Tensor):
            self.total.fill_(count)  # in place: the log buffer may hold references to it
        else:
            self.total = count

    def add_known(self) -> None:
        self.known += 1
        self.total += 1

    def add_on_device(self, skipped: torch.Tensor) -> None:
        self.total += skipped.to(self.total.device, non_blocking=True)  # (the same device: no-op)
        self._unread = True

    def value(self) -> int:
        """Every skip so far (reads the device counter back: log lines, checkpoints)."""
        return int(self.total)

    def unread(self) -> int:
        """Skips the host has not been told of (reads the device counter back if any may be)."""
        return self.value() - self.known if self._unread else 0

    def take_new(self) -> int:
        """:meth:`unread`, and from now on they are known (no read when none can be)."""
        new = self.unread()
        self.known, self._unread = self.known + new, False
        return new

    def save(self, state: Dict[str, Any], key: str) -> None:
        """Put the count under ``key`` (and the skips the host has not read under ``key_unread``).

        Read back here (a checkpoint is a sync point anyway). Unread skips are
        saved apart: the checkpoint's update count still includes them, and the
        resumed run corrects it at its first log line.
        """
        count, unread = self.value(), self.unread()
        if count:
            state[key] = count
        if unread:
            state[f'{key}_unread'] = unread

    def load(self, state: Dict[str, Any], key: str) -> None:
        self.set(state.get(key, 0), state.get(f'{key}_unread', 0))
