"""Removing a checkpoint, which is a file or (sharded) a folder."""

import os
import os.path as osp
import shutil


def remove_checkpoint(path: str) -> None:
    """Remove a checkpoint file, or a sharded checkpoint's folder (a link: the link only)."""
    if osp.isdir(path) and not osp.islink(path):
        shutil.rmtree(path)
    else:
        os.remove(path)
