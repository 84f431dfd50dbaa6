"""The ``mtrain`` logger: console on every rank at WARNING+, INFO on rank 0, optional file."""

import logging
import sys
from typing import Optional

from .dist import get_dist_info

_FORMAT = '%(asctime)s - %(name)s - %(levelname)s - %(message)s'


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
        handler.setFormatter(logging.Formatter(_FORMAT))
        logger.addHandler(handler)
    if log_file is not None and rank == 0:
        for h in list(logger.handlers):
            if isinstance(h, logging.FileHandler):
                logger.removeHandler(h)
                h.close()
        file_handler = logging.FileHandler(log_file, 'w')
        file_handler.setFormatter(logging.Formatter(_FORMAT))
        logger.addHandler(file_handler)
    logger.setLevel(log_level if rank == 0 else logging.ERROR)
    return logger


def print_log(msg: str, logger: Optional[logging.Logger] = None,
              level: int = logging.INFO) -> None:
    """Log through ``logger`` or print when there is none."""
    if logger is None:
        print(msg)
    else:
        logger.log(level, msg)
