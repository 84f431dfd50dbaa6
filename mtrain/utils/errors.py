"""The error types for user mistakes, and the "did you mean" helper.

mmcv 1.x raised ``AssertionError`` or ``TypeError`` at many of the places
where mtrain raises a sentence; 1.x-era code catches those (``except
AssertionError``, ``pytest.raises(TypeError)``). mtrain's errors there are
both: :class:`ConfigAssertionError` and :class:`ConfigTypeError` are
``ConfigError`` s, :class:`AssertedValueError` / :class:`AssertedTypeError`
are what mtrain documents (``ValueError`` / ``TypeError``) and an
``AssertionError``. :func:`config_error_for` picks the ``ConfigError`` that
keeps a wrapped error catchable as what it was.
"""

import difflib
import re
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


def refuse_url(path: str, what: str, key: Optional[str] = None) -> None:
    """Raise a one-line :class:`ConfigError` when ``path`` is a URL (``s3://``, ``http://``).

    mtrain writes checkpoints to local files only (mmcv 1.x's ``FileClient``
    backends are left out); ``os.makedirs`` would otherwise make a local
    folder named ``s3:`` and the log would name the URL as if it were there.
    """
    if isinstance(path, str) and re.match(r'[A-Za-z][A-Za-z0-9+.-]*://', path):
        raise ConfigError(f'{what} {path!r} is a URL: mtrain writes checkpoints to local files '
                          'only. Give a local (or mounted) folder and copy the files to the '
                          'remote store afterwards (docs/migration.md).', key=key)


class ConfigTypeError(ConfigError, TypeError):
    """A :class:`ConfigError` where mmcv 1.x raised ``TypeError`` (a keyword a class refuses)."""


class ConfigAssertionError(ConfigError, AssertionError):
    """A :class:`ConfigError` where mmcv 1.x asserted (an invalid argument value)."""


class AssertedValueError(ValueError, AssertionError):
    """An argument value mtrain refuses where mmcv 1.x asserted (e.g. ``warmup_ratio``)."""


class AssertedTypeError(TypeError, AssertionError):
    """An argument type mtrain refuses where mmcv 1.x asserted (e.g. a non-Hook hook)."""


def config_error_for(error: BaseException) -> type:
    """The :class:`ConfigError` class to wrap ``error`` in, catchable as what ``error`` was.

    A ``TypeError`` stays a ``TypeError`` and an ``AssertionError`` an
    ``AssertionError`` (as mmcv's ``build_from_cfg`` re-raises
    ``type(e)(...)``); anything else is a plain ``ConfigError``.
    """
    if isinstance(error, AssertionError):
        return ConfigAssertionError
    if isinstance(error, TypeError):
        return ConfigTypeError
    return ConfigError


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
