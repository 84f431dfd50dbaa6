"""The one error type for user mistakes in configs, and the "did you mean" helper."""

import difflib
from typing import Iterable, List, Optional


class ConfigError(ValueError):
    """A config value that mtrain cannot use.

    The message is meant for the user: it names the config file (when known),
    the key path (e.g. ``optimizer.type``), what was found and what to do.
    ``tools/train.py`` prints it without a traceback unless ``--debug`` is given.
    """

    def __init__(self, message: str, key: Optional[str] = None,
                 filename: Optional[str] = None):
        self.key = key
        self.filename = filename
        self.message = message
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.filename:
            where.append(str(self.filename))
        if self.key:
            where.append(f'key `{self.key}`')
        prefix = ', '.join(where)
        return f'{prefix}: {self.message}' if prefix else self.message

    def with_file(self, filename: str) -> 'ConfigError':
        """Return the same error, now naming the config file it came from."""
        if self.filename is None:
            self.filename = filename
            self.args = (self._render(), )
        return self


def closest_names(name: str, candidates: Iterable[str], n: int = 3) -> List[str]:
    """The registered or known names closest to ``name`` (case-insensitive)."""
    candidates = sorted(set(candidates))
    lowered = {c.lower(): c for c in candidates}
    hits = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.6)
    return [lowered[h] for h in hits]


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """A sentence suggesting the closest names, or an empty string."""
    hits = closest_names(name, candidates)
    if not hits:
        return ''
    return ' Did you mean ' + ' or '.join(f"'{h}'" for h in hits) + '?'
