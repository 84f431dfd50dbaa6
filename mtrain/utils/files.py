"""Removing and replacing a checkpoint, which is a file or (sharded) a folder."""

import ctypes
import os
import os.path as osp
import shutil


def remove_checkpoint(path: str) -> None:
    """Remove a checkpoint file, or a sharded checkpoint's folder (a link: the link only)."""
    if osp.isdir(path) and not osp.islink(path):
        shutil.rmtree(path)
    else:
        os.remove(path)


def exchange_paths(a: str, b: str) -> bool:
    """Swap what ``a`` and ``b`` name in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``).

    For replacing a folder that exists: ``os.replace`` cannot rename over a
    folder that is not empty, and moving the old one aside first leaves a
    moment with neither. False where the system cannot (then do that).
    """
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):  # not Linux, or a libc without it
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0
