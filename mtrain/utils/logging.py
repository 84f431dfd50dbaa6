"""The ``mtrain`` logger: console on every rank at WARNING+, INFO on rank 0, optional file."""

import logging
import sys
import weakref
from typing import Optional, Union

from .dist import get_dist_info

_FORMAT = '%(asctime)s - %(name)s - %(levelname)s - %(message)s'
_initialized = set()  # logger names get_logger configured (print_log reuses them as they are)


class _SharedFormatter(logging.Formatter):
    """One formatter for the console and the log file: each record is formatted once.

    Both handlers write the same text; formatting a record (its message and
    its timestamp) twice cost a third of a training log line.
    """

    def __init__(self) -> None:
        super().__init__(_FORMAT)
        # (a weak reference to the last record, its text): a record's traceback is not kept
        self._last = (lambda: None, '')

    def format(self, record: logging.LogRecord) -> str:
        last, text = self._last
        if last() is not record:
            text = super().format(record)
            self._last = (weakref.ref(record), text)
        return text


_FORMATTER = _SharedFormatter()


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is now (it may be replaced, e.g. by pytest)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def get_logger(name: str = 'mtrain', log_file: Optional[str] = None,
               log_level: int = logging.INFO) -> logging.Logger:
    """Get (and on first use configure) a logger.

    Rank 0 logs at ``log_level`` to the console and to ``log_file`` when given;
    other ranks only report errors, so a multi-process log is not repeated N times.
    """
    logger = logging.getLogger(name)
    logger.propagate = False
    rank, _ = get_dist_info()
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        handler = _StderrHandler()
        handler.setFormatter(_FORMATTER)
        logger.addHandler(handler)
    if log_file is not None and rank == 0:
        for h in list(logger.handlers):
            if isinstance(h, logging.FileHandler):
                logger.removeHandler(h)
                h.close()
        file_handler = logging.FileHandler(log_file, 'w')
        file_handler.setFormatter(_FORMATTER)
        logger.addHandler(file_handler)
    logger.setLevel(log_level if rank == 0 else logging.ERROR)
    _initialized.add(name)
    return logger


def print_log(msg: str, logger: Union[logging.Logger, str, None] = None,
              level: int = logging.INFO) -> None:
    """Print or log ``msg``, as mmcv 1.x's ``print_log``.

    Args:
        msg: the message.
        logger: ``None``: ``print``; a ``logging.Logger``: log through it;
            ``'silent'``: nothing; any other name (``'root'``, ``'mmcv'``,
            ``'mtrain'``...): the logger of that name, configured by
            :func:`get_logger` on first use unless it (or a parent whose name
            it starts with) already was.
        level: the logging level.

    Raises:
        TypeError: ``logger`` is none of those.
    """
    if logger is None:
        print(msg)
    elif isinstance(logger, logging.Logger):
        logger.log(level, msg)
    elif logger == 'silent':
        pass
    elif isinstance(logger, str):
        if any(logger.startswith(name) for name in _initialized):
            named = logging.getLogger(logger)
        else:
            named = get_logger(logger)
        named.log(level, msg)
    else:
        raise TypeError('logger should be a logging.Logger, a logger name, "silent" or None, '
                        f'not {type(logger).__name__}')
