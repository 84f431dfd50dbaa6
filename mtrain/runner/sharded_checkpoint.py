"""Sharded checkpoints through ``torch.distributed.checkpoint`` (DCP): each rank writes its part.

A sharded checkpoint is a folder with the name a file would have
(``epoch_3.pth/``, as Lightning names its sharded ``*.ckpt`` folders), so
``latest.pth``, ``max_keep_ckpts``, ``--auto-resume`` and ``hook_msgs.last_ckpt``
treat it as they treat a file. It holds:

- ``__<rank>_0.distcp``: each rank's own shards of the model's weights and of
  the optimizer state (a DDP run's replicated tensors are written once), and
  ``.metadata``, DCP's index of them, written by rank 0 once every rank has
  written its part;
- ``mtrain_state.pth``: everything else an ordinary mtrain checkpoint holds
  (``meta``, ``progress``, hooks, log buffer, every rank's RNG and data
  position), written by rank 0 last.

The optimizer state is keyed by parameter name (DCP's ``get_optimizer_state_dict``),
so it loads into any sharding of the same model: a checkpoint written on N
ranks resumes on M and DCP reshards the tensors as it reads them.

This module is the DCP layer only (torch in, torch out); where the folder is
staged and how it becomes a checkpoint is :mod:`.checkpoint`'s and
:mod:`.run_checkpoints`'s. ``torch.distributed.checkpoint`` is imported at
first use: it costs about 1.4 s, paid only by runs that shard their checkpoints.
"""

import os.path as osp
import warnings
from contextlib import contextmanager
from typing import Any, Dict, Iterable, Iterator, Optional

import torch
import torch.distributed as dist
from torch import nn

from ..parallel import unwrap

#: The rank-0 file of a sharded checkpoint: the ordinary checkpoint minus its tensors.
STATE_FILE = 'mtrain_state.pth'
#: The entries of an ordinary checkpoint that a sharded one keeps in DCP's files.
SHARDED_KEYS = ('state_dict', 'optimizer')


def is_sharded(path: str) -> bool:
    """Whether ``path`` is a sharded checkpoint folder (DCP's index is in it)."""
    return osp.isdir(path) and osp.isfile(osp.join(path, '.metadata'))


def _dcp():
    import torch.distributed.checkpoint as dcp  # lazy: see the module docstring
    import torch.distributed.checkpoint.state_dict  # noqa: F401 - dcp.state_dict below
    return dcp


def _options(dcp, **kwargs):
    return dcp.state_dict.StateDictOptions(**kwargs)


def local_state(model: nn.Module, optimizer: Any, with_optimizer: bool) -> Dict[str, Any]:
    """This rank's part of the weights and optimizer state, sharing memory with the run.

    Under FSDP the tensors are DTensors holding this rank's shard only; no rank
    gathers the whole. A dict of optimizers gives ``{name: state}``. Collective
    under FSDP (every rank calls it).
    """
    dcp, module = _dcp(), unwrap(model)
    state = {'state_dict': dcp.state_dict.get_model_state_dict(module)}
    if with_optimizer and optimizer is not None:
        if isinstance(optimizer, dict):
            state['optimizer'] = {name: dcp.state_dict.get_optimizer_state_dict(module, optim)
                                  for name, optim in optimizer.items()}
        else:
            state['optimizer'] = dcp.state_dict.get_optimizer_state_dict(module, optimizer)
    return state


def write_shards(state: Dict[str, Any], folder: str,
                 group: Optional[dist.ProcessGroup] = None) -> None:
    """Write every rank's ``state`` into ``folder`` (collective over ``group``).

    Returns on every rank once all ranks' files and DCP's index are written
    (rank 0 writes the index after gathering every rank's result). Files are
    fsync'ed (``FileSystemWriter(sync_files=True)``).
    """
    dcp = _dcp()
    with _one_process_is_meant():
        dcp.save(state, storage_writer=dcp.FileSystemWriter(folder, sync_files=True),
                 process_group=group, no_dist=not _distributed())


def read_shards(folder: str, model: nn.Module, optimizer: Any, with_optimizer: bool) -> None:
    """Load ``folder``'s weights (and optimizer state) into this run, resharded to its ranks.

    Collective when the run has several ranks: each reads the parts of the
    tensors its own shards cover, whatever the sharding that wrote them.
    Raises ``ValueError`` (what no rank could load, e.g. a shape that differs).
    """
    dcp, module = _dcp(), unwrap(model)
    if with_optimizer:  # the saved groups' keys, so that the template below asks for them
        optimizers = optimizer if isinstance(optimizer, dict) else {None: optimizer}
        prefix = {name: 'optimizer' if name is None else f'optimizer.{name}' for name in optimizers}
        saved = read_whole(folder, [f'{p}.param_groups' for p in prefix.values()])['optimizer']
        for name, optim in optimizers.items():
            adopt_group_keys(optim, saved if name is None else saved[name])
    state = local_state(model, optimizer, with_optimizer)
    try:
        with _one_process_is_meant():
            dcp.load(state, storage_reader=dcp.FileSystemReader(folder),
                     no_dist=not _distributed())
    except dcp.api.CheckpointException as e:  # (a BaseException) holding each rank's error
        causes = {str(error[0] if isinstance(error, tuple) else error).strip().splitlines()[-1]
                  for error in e.failures.values()}
        raise ValueError('; '.join(sorted(causes))) from None
    dcp.state_dict.set_model_state_dict(module, state['state_dict'])
    if 'optimizer' in state:
        optimizers = optimizer if isinstance(optimizer, dict) else {None: optimizer}
        for name, optim in optimizers.items():
            saved = state['optimizer'] if name is None else state['optimizer'][name]
            dcp.state_dict.set_optimizer_state_dict(module, optim, saved)


def read_whole(folder: str, keys: Optional[Iterable[str]] = None) -> Dict[str, Any]:
    """The whole tensors of ``folder`` in this one process: ``{'state_dict', 'optimizer'}``.

    For one process that wants the ordinary form (``tools/test.py``,
    ``load_from``, the consolidation tool); ``keys`` limits it (e.g.
    ``['state_dict']``: the weights, not the optimizer). Rank-local: it reads
    all of every rank's files, so it needs the memory of the whole.
    """
    dcp = _dcp()
    # What format_utils.dcp_to_torch_save does, without the detour through a file.
    from torch.distributed.checkpoint.format_utils import _EmptyStateDictLoadPlanner
    from torch.distributed.checkpoint.state_dict_loader import _load_state_dict
    state: Dict[str, Any] = {}
    _load_state_dict(state, storage_reader=dcp.FileSystemReader(folder),
                     planner=_EmptyStateDictLoadPlanner(keys=set(keys) if keys else None),
                     no_dist=True)
    return state


def write_whole(state: Dict[str, Any], folder: str) -> None:
    """Write whole tensors (``{'state_dict', 'optimizer'}``) as a one-rank sharded checkpoint."""
    dcp = _dcp()
    with _one_process_is_meant():
        dcp.save(state, storage_writer=dcp.FileSystemWriter(folder, sync_files=True),
                 no_dist=True)


def keyed_by_name(optimizer_state: Dict[str, Any]) -> bool:
    """Whether an optimizer state is keyed by parameter name (DCP's form), not by index."""
    groups = optimizer_state.get('param_groups') or [{}]
    params = groups[0].get('params') or []
    return bool(params) and isinstance(params[0], str)


def adopt_group_keys(optimizer: torch.optim.Optimizer, state: Dict[str, Any]) -> None:
    """Give ``optimizer``'s param groups the keys that ``state``'s have and they lack.

    DCP loads what the run's own state asks for; a key a hook added to the
    groups during the saved run (``initial_lr``, which the LR hook sets at
    ``before_run`` only where it is missing) would be dropped, and the
    schedule would restart from the resumed lr. ``Optimizer.load_state_dict``
    takes the saved groups whole; this makes DCP's load do the same.
    """
    for group, saved in zip(optimizer.param_groups, state.get('param_groups', ())):
        for key, value in saved.items():
            if key != 'params':
                group.setdefault(key, value)


def load_named_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer,
                               state: Dict[str, Any]) -> None:
    """Load a whole optimizer state keyed by parameter name into an unsharded run's optimizer."""
    dcp = _dcp()
    adopt_group_keys(optimizer, state)
    dcp.state_dict.set_optimizer_state_dict(unwrap(model), optimizer, state,
                                            options=_options(dcp, full_state_dict=True))


def checkpoint_group() -> Optional[dist.ProcessGroup]:
    """A gloo group of all ranks for the checkpoint writes alone (collective: create it once).

    A write in the background runs DCP's collectives on the writer thread
    while the training thread runs its own; on one group their order would
    be undefined (a hang, or tensors crossed). Gloo: DCP exchanges only
    plans and metadata, on the CPU, whatever the training backend.
    """
    return dist.new_group(backend='gloo') if _distributed() else None


@contextmanager
def _one_process_is_meant() -> Iterator[None]:
    """Without DCP's warning that it assumes one process: in one process, it is meant."""
    with warnings.catch_warnings():
        warnings.filterwarnings('ignore', message='torch.distributed is .*single process')
        yield


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
