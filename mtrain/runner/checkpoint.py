"""Checkpoint files: crash-safe writes and safe loads.

A checkpoint is written to ``<name>.tmp-<pid>`` in the same folder, flushed
and fsync'ed, then renamed over ``<name>`` (a rename within one filesystem is
atomic), so a crash, a ``kill -9`` or a full disk leaves either the old file or
the new one, never half of one. ``latest.pth`` is a symlink moved the same way
(a new link renamed over the old) only after the file it points to is whole.

Loading uses ``torch.load(weights_only=True)``: tensors, numbers, strings and
containers only, so a checkpoint cannot run code. Pass ``trusted=True`` (the
``--trust-checkpoint`` flag) only for a file you made yourself that holds
other pickled objects.
"""

import os
import os.path as osp
import pickle
import re
from typing import Any, Dict, List, Optional

import torch
from torch import nn


class CheckpointError(RuntimeError):
    """A checkpoint file that cannot be used (missing, truncated, unsafe)."""


def save_checkpoint_file(checkpoint: Dict[str, Any], path: str) -> None:
    """Write ``checkpoint`` to ``path`` atomically (temp file, fsync, rename)."""
    folder = osp.dirname(osp.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = f'{path}.tmp-{os.getpid()}'
    try:
        with open(tmp, 'wb') as f:
            torch.save(checkpoint, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if osp.exists(tmp):
            os.remove(tmp)
        raise
    _fsync_dir(folder)


def update_latest_link(target: str, link: str) -> None:
    """Point ``link`` at ``target`` (a relative symlink), atomically."""
    tmp = f'{link}.tmp-{os.getpid()}'
    if osp.lexists(tmp):
        os.remove(tmp)
    os.symlink(osp.basename(target), tmp)
    os.replace(tmp, link)
    _fsync_dir(osp.dirname(osp.abspath(link)))


def _fsync_dir(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def load_checkpoint_file(path: str, map_location: Any = 'cpu',
                         trusted: bool = False) -> Dict[str, Any]:
    """Load a checkpoint safely.

    Raises:
        CheckpointError: the file is missing, truncated/corrupt, or holds
            objects other than tensors and plain containers (unless ``trusted``).
    """
    if not osp.isfile(path):
        raise CheckpointError(f'checkpoint {path} does not exist (or is a dangling link)')
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=not trusted)
    except pickle.UnpicklingError as e:
        if 'weights_only' in str(e) or 'Unsupported global' in str(e):
            raise CheckpointError(
                f'checkpoint {path} holds pickled Python objects that are not tensors or '
                f'plain data, so it was refused: loading it could run code. If you made this '
                f'file yourself and trust it, pass --trust-checkpoint (trusted=True). '
                f'Detail: {str(e).splitlines()[0]}') from e
        raise CheckpointError(f'checkpoint {path} is corrupt: {e}') from e
    except (RuntimeError, EOFError, OSError, ValueError) as e:
        raise CheckpointError(f'checkpoint {path} is truncated or corrupt and cannot be '
                              f'loaded ({type(e).__name__}: {str(e).splitlines()[0]})') from e
    if not isinstance(ckpt, dict):
        raise CheckpointError(f'checkpoint {path} holds a {type(ckpt).__name__}, not a dict')
    return ckpt


_CKPT_NAME = re.compile(r'^(epoch|iter)_(\d+)\.pth$')


def list_checkpoints(work_dir: str) -> List[str]:
    """``epoch_N.pth`` / ``iter_N.pth`` in ``work_dir``, newest (mtime, then N) last."""
    if not osp.isdir(work_dir):
        return []
    names = [n for n in os.listdir(work_dir) if _CKPT_NAME.match(n)]
    paths = [osp.join(work_dir, n) for n in names]
    return sorted(paths, key=lambda p: (osp.getmtime(p), int(_CKPT_NAME.match(
        osp.basename(p)).group(2))))


def find_latest_valid(work_dir: str, logger=None) -> Optional[str]:
    """The newest checkpoint in ``work_dir`` that loads; corrupt ones are reported."""
    for path in reversed(list_checkpoints(work_dir)):
        try:
            load_checkpoint_file(path)
            return path
        except CheckpointError as e:
            if logger is not None:
                logger.warning(f'auto-resume skips {path}: {e}')
    return None


def weights_to_cpu(state_dict: Dict[str, Any]) -> Dict[str, Any]:
    """A copy of ``state_dict`` with every tensor on the CPU."""
    return type(state_dict)((k, v.detach().cpu() if isinstance(v, torch.Tensor) else v)
                            for k, v in state_dict.items())


# The model's and optimizer's states go through the wrapper: one that shards the model
# (FSDP) gathers and scatters them itself.
def model_state(model: nn.Module) -> Dict[str, Any]:
    gather = getattr(model, 'checkpoint_state_dict', None)
    return gather() if gather is not None else model.module.state_dict()


def load_model_state(model: nn.Module, state: Dict[str, Any], strict: bool) -> Any:
    scatter = getattr(model, 'load_checkpoint_state_dict', None)
    if scatter is not None:
        return scatter(state, strict)
    return model.module.load_state_dict(state, strict=strict)


def optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> Dict[str, Any]:
    gather = getattr(model, 'optimizer_state_dict', None)
    return gather(optimizer) if gather is not None else optimizer.state_dict()


def load_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer,
                         state: Dict[str, Any]) -> None:
    scatter = getattr(model, 'load_optimizer_state_dict', None)
    if scatter is not None:
        scatter(optimizer, state)
    else:
        optimizer.load_state_dict(state)
