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

mmcv 1.x's checkpoint functions are here under their names, with mmcv's
behaviour and this module's safe loading (the end of this module):
``save_checkpoint(model, filename, optimizer, meta)``,
``load_checkpoint(model, filename, map_location, strict, logger, revise_keys)``,
``load_state_dict``, ``get_state_dict``, ``weights_to_cpu`` and
``load_checkpoint_with_prefix``.
"""

import logging
import os
import os.path as osp
import pickle
import re
import shutil
import time
from collections import OrderedDict
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import nn

from .. import __version__
from ..parallel import unwrap
from ..utils import get_dist_info
from ..utils.errors import refuse_url
from ..utils.files import exchange_paths, remove_checkpoint
from .inner_wrappers import into_inner_wrappers, out_of_inner_wrappers
from .sharded_checkpoint import (SHARDED_KEYS, STATE_FILE, adopt_group_keys, is_sharded,
                                 keyed_by_name, load_named_optimizer_state, read_whole)


class CheckpointError(RuntimeError):
    """A checkpoint file that cannot be used (missing, truncated, unsafe)."""


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """No such checkpoint file: also a ``FileNotFoundError``, what mmcv 1.x raised."""


class CheckpointAssertionError(CheckpointError, AssertionError):
    """A :class:`CheckpointError` where mmcv 1.x asserted (no weights under a prefix)."""


def save_checkpoint_file(checkpoint: Dict[str, Any], path: str) -> None:
    """Write ``checkpoint`` to ``path`` atomically (temp file, fsync, rename)."""
    refuse_url(path, 'the checkpoint file')
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


def finish_sharded(stage: str, rest: Dict[str, Any], path: str) -> None:
    """Make the written shards in ``stage`` the checkpoint ``path``: complete, or absent.

    ``rest`` (the checkpoint minus its tensors) is written into ``stage`` last,
    then the folder is renamed to ``path``; an older ``path`` (the same name
    saved again) is swapped out in the same step where the system can
    (:func:`~mtrain.utils.files.exchange_paths`), else moved aside just
    before. ``path`` never names a half-written folder.
    """
    refuse_url(path, 'the checkpoint folder')
    save_checkpoint_file(rest, osp.join(stage, STATE_FILE))
    folder = osp.dirname(osp.abspath(path))
    os.makedirs(folder, exist_ok=True)
    if os.stat(stage).st_dev != os.stat(folder).st_dev:  # another filesystem: copy it over
        copy = f'{path}.tmp-{os.getpid()}'
        shutil.copytree(stage, copy)
        shutil.rmtree(stage)
        stage = copy
    if osp.lexists(path) and exchange_paths(stage, path):
        remove_checkpoint(stage)  # (the older checkpoint, now)
    else:
        old = f'{path}.old-{os.getpid()}' if osp.lexists(path) else None
        if old is not None:
            os.replace(path, old)
        os.replace(stage, path)
        if old is not None:
            remove_checkpoint(old)
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


def load_checkpoint_file(path: str, map_location: Any = 'cpu', trusted: bool = False,
                         keys: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Load a checkpoint safely.

    A sharded checkpoint's folder gives the same dict, its tensors whole
    (read from every rank's files in this one process: see
    :func:`.sharded_checkpoint.read_whole`); ``keys`` limits which of its
    sharded entries are read (``['state_dict']``: the weights only).

    Raises:
        CheckpointError: the file is missing, truncated/corrupt, or holds
            objects other than tensors and plain containers (unless ``trusted``).
    """
    if is_sharded(path):
        ckpt = load_checkpoint_file(osp.join(path, STATE_FILE), map_location, trusted)
        sharded = ckpt.get('sharded', {}).get('keys', SHARDED_KEYS)
        ckpt.update(read_whole(path, [k for k in sharded if keys is None or k in keys]))
        return ckpt
    if not osp.isfile(path):
        raise CheckpointNotFoundError(f'checkpoint {path} does not exist (or is a dangling '
                                      'link)')
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
            # A sharded checkpoint: its index and rank 0's file (written last) are enough.
            load_checkpoint_file(osp.join(path, STATE_FILE) if is_sharded(path) else path)
            return path
        except CheckpointError as e:
            if logger is not None:
                logger.warning(f'auto-resume skips {path}: {e}')
    return None


def weights_to_cpu(state_dict: Dict[str, Any]) -> Dict[str, Any]:
    """A copy of ``state_dict`` with every tensor on the CPU (``_metadata`` kept)."""
    copy = type(state_dict)((k, v.detach().cpu() if isinstance(v, torch.Tensor) else v)
                            for k, v in state_dict.items())
    metadata = getattr(state_dict, '_metadata', None)
    if metadata is not None:
        copy._metadata = metadata
    return copy


# The model's and optimizer's states go through the wrapper: one that shards the model
# (FSDP) gathers and scatters them itself.
def model_state(model: nn.Module) -> Dict[str, Any]:
    """The model's weights, named without the wrappers inside it (as mmcv's ``get_state_dict``)."""
    gather = getattr(model, 'checkpoint_state_dict', None)
    if gather is not None:
        return gather()
    return out_of_inner_wrappers(model.module.state_dict(), model.module)


Optimizers = Union[torch.optim.Optimizer, Dict[str, torch.optim.Optimizer]]


def optimizer_state(model: nn.Module, optimizer: Optimizers) -> Dict[str, Any]:
    """The optimizer's state; ``{name: state}`` for a dict of optimizers (as mmcv saves it)."""
    if isinstance(optimizer, dict):
        return {name: optimizer_state(model, optim) for name, optim in optimizer.items()}
    gather = getattr(model, 'optimizer_state_dict', None)
    return gather(optimizer) if gather is not None else optimizer.state_dict()


def load_optimizer_state(model: nn.Module, optimizer: Optimizers, state: Dict[str, Any]) -> None:
    """Restore what :func:`optimizer_state` returned (per name for a dict of optimizers)."""
    if isinstance(optimizer, dict):
        missing = sorted(set(optimizer) - set(state))
        if missing:
            raise CheckpointError(f'the checkpoint has no optimizer state for {missing} (it has '
                                  f'{sorted(state)}); resume with resume_optimizer=False to '
                                  'start these optimizers afresh')
        for name, optim in optimizer.items():
            load_optimizer_state(model, optim, state[name])
        return
    scatter = getattr(model, 'load_optimizer_state_dict', None)
    if scatter is not None:  # FSDP's whole state, keyed by name: loaded as DCP loads it
        adopt_group_keys(optimizer, state)
        scatter(optimizer, state)
    elif keyed_by_name(state):  # consolidated from a sharded checkpoint
        load_named_optimizer_state(model, optimizer, state)
    else:
        optimizer.load_state_dict(state)



# -- mmcv 1.x's checkpoint functions ------------------------------------------------
DEFAULT_REVISE_KEYS = ((r'^module\.', ''), )


def get_state_dict(module: nn.Module, destination: Optional[OrderedDict] = None,
                   prefix: str = '', keep_vars: bool = False) -> OrderedDict:
    """``module.state_dict()`` with every model wrapper left out of the keys.

    A wrapper anywhere in the tree (``nn.Module(DDP(...))``) contributes no
    ``module.`` to the names, so the weights load into the plain model.
    """
    if destination is None:
        destination = OrderedDict()
        destination._metadata = OrderedDict()
    module = unwrap(module)
    destination._metadata[prefix[:-1]] = dict(version=module._version)
    module._save_to_state_dict(destination, prefix, keep_vars)
    for name, child in module._modules.items():
        if child is not None:
            get_state_dict(child, destination, f'{prefix}{name}.', keep_vars)
    return destination


def save_checkpoint(model: nn.Module, filename: str, optimizer: Optional[Optimizers] = None,
                    meta: Optional[Dict[str, Any]] = None) -> None:
    """Write ``{'meta', 'state_dict', ['optimizer']}`` to ``filename`` (mmcv's layout).

    ``meta`` gets ``mtrain_version`` and ``time`` (mmcv adds ``mmcv_version``),
    and the model's ``CLASSES`` when it has them. A dict of optimizers is
    saved as ``{name: state}``. The write is atomic, as every mtrain checkpoint.
    """
    if meta is None:
        meta = {}
    elif not isinstance(meta, dict):
        raise TypeError(f'meta must be a dict or None, but got {type(meta).__name__}')
    meta.update(mtrain_version=__version__, time=time.asctime())
    model = unwrap(model)
    if getattr(model, 'CLASSES', None) is not None:
        meta.update(CLASSES=model.CLASSES)
    checkpoint = {'meta': meta, 'state_dict': weights_to_cpu(get_state_dict(model))}
    if optimizer is not None:
        checkpoint['optimizer'] = optimizer_state(model, optimizer)
    save_checkpoint_file(checkpoint, filename)


def load_state_dict(module: nn.Module, state_dict: Dict[str, Any], strict: bool = False,
                    logger: Optional[logging.Logger] = None) -> Tuple[List[str], List[str],
                                                                      List[str]]:
    """Load every tensor of ``state_dict`` that fits ``module``; report the rest.

    As mmcv 1.x's ``load_state_dict``: a tensor whose shape differs from the
    model's (a fine-tuning head with other ``num_classes``) is skipped, not
    fatal; missing keys (``num_batches_tracked`` aside), unexpected keys and
    shape mismatches are one warning on rank 0 (``logger``, else printed), or
    a ``RuntimeError`` with ``strict=True``.

    Returns:
        ``(missing_keys, unexpected_keys, mismatched)``; ``mismatched`` lists
        ``'name: checkpoint (a, b), model (c, d)'``.
    """
    scatter = getattr(module, 'load_checkpoint_state_dict', None)  # FSDP: a collective
    module = unwrap(module)
    own = module.state_dict()
    state_dict = into_inner_wrappers(state_dict, module, own)
    mismatched = [f'{k}: checkpoint {tuple(v.shape)}, model {tuple(own[k].shape)}'
                  for k, v in state_dict.items() if k in own and isinstance(v, torch.Tensor)
                  and v.shape != own[k].shape]
    skipped = {entry.split(':')[0] for entry in mismatched}
    fitting = OrderedDict((k, v) for k, v in state_dict.items() if k not in skipped)
    if hasattr(state_dict, '_metadata'):
        fitting._metadata = state_dict._metadata
    result = (scatter(fitting, False) if scatter is not None
              else module.load_state_dict(fitting, strict=False))
    missing = [k for k in result.missing_keys
               if 'num_batches_tracked' not in k and k not in skipped]
    unexpected = list(result.unexpected_keys)
    message = _mismatch_message(missing, unexpected, mismatched)
    if message and strict:
        raise RuntimeError(message)
    if message and get_dist_info()[0] == 0:
        (logger.warning if logger is not None else print)(message)
    return missing, unexpected, mismatched


def _mismatch_message(missing: List[str], unexpected: List[str], mismatched: List[str]) -> str:
    parts = [f'shape mismatch (not loaded): {"; ".join(mismatched)}' if mismatched else '',
             f'unexpected key in source state_dict: {", ".join(unexpected)}' if unexpected else '',
             f'missing keys in source state_dict: {", ".join(missing)}' if missing else '']
    parts = [p for p in parts if p]
    if not parts:
        return ''
    return 'The model and loaded state dict do not match exactly\n' + '\n'.join(parts)


def revise_state_dict(state_dict: Dict[str, Any],
                      revise_keys: Sequence[Tuple[str, str]] = DEFAULT_REVISE_KEYS) -> OrderedDict:
    """``state_dict`` with each ``(pattern, replacement)`` applied to every key, in turn."""
    metadata = getattr(state_dict, '_metadata', OrderedDict())
    for pattern, replacement in revise_keys:
        state_dict = OrderedDict((re.sub(pattern, replacement, k), v)
                                 for k, v in state_dict.items())
    state_dict._metadata = metadata
    return state_dict


def load_checkpoint(model: nn.Module, filename: str, map_location: Any = None,
                    strict: bool = False, logger: Optional[logging.Logger] = None,
                    revise_keys: Sequence[Tuple[str, str]] = DEFAULT_REVISE_KEYS,
                    trusted: bool = False) -> Dict[str, Any]:
    """Load the weights of ``filename`` into ``model`` (mmcv 1.x's ``load_checkpoint``).

    The file is loaded safely (``weights_only``; ``trusted=True`` to allow
    pickled objects), its ``state_dict`` (or the whole file, a bare state dict)
    has ``revise_keys`` applied (default: strip a leading ``module.``), then
    :func:`load_state_dict` loads what fits. Local files only: download a URL
    first. Returns the whole checkpoint (of a sharded checkpoint's folder, all
    but the optimizer state, which is not read).
    """
    checkpoint = load_checkpoint_file(filename, 'cpu' if map_location is None else map_location,
                                      trusted, keys=['state_dict'])
    state_dict = revise_state_dict(checkpoint.get('state_dict', checkpoint), revise_keys)
    load_state_dict(model, state_dict, strict, logger)
    return checkpoint


def load_checkpoint_with_prefix(prefix: str, filename: str,
                                map_location: Any = None) -> Dict[str, Any]:
    """The weights under ``prefix`` (e.g. ``'backbone'``), with the prefix taken off.

    What mmcv's ``init_cfg=dict(type='Pretrained', prefix='backbone.', ...)``
    loads: a detector's checkpoint gives its backbone's weights.
    """
    checkpoint = load_checkpoint_file(filename, 'cpu' if map_location is None else map_location)
    state_dict = checkpoint.get('state_dict', checkpoint)
    prefix = prefix if prefix.endswith('.') else prefix + '.'
    picked = {k[len(prefix):]: v for k, v in state_dict.items() if k.startswith(prefix)}
    if not picked:
        raise CheckpointAssertionError(f'{filename} has no weights under the prefix '
                                       f'{prefix!r}')
    return picked


def _load_checkpoint(filename: str, map_location: Any = None, logger: Any = None) -> Dict[str, Any]:
    """mmcv's (private, widely imported) raw load: the whole checkpoint dict, loaded safely."""
    return load_checkpoint_file(filename, 'cpu' if map_location is None else map_location)


_load_checkpoint_with_prefix = load_checkpoint_with_prefix  # mmcv's (private) name
