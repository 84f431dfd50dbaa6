"""A runner's sharded checkpoint writes: ``checkpoint_config = dict(sharded=True)``.

On by default for a sharded (FSDP) model on several ranks: there the
whole-model file needs the full weights and optimizer state gathered in one
process at every save, the limit sharding exists to lift. Elsewhere (DDP, one
process) it is a choice: ``sharded=True`` writes the same folder, the
replicated tensors once.

The write keeps the runner's two steps (:meth:`~.RunnerCheckpoints.gather_checkpoint_state`,
a collective, then ``save_checkpoint`` on rank 0):

1. every rank writes its own shards into a staging folder in the work dir,
   ``.sharded-tmp-e<epoch>-i<iter>-u<updates>-s<n>`` (the run's n-th sharded
   save; in the background, from a
   copy of the shards, with ``async_save``), on a gloo group of its own;
2. rank 0 writes ``mtrain_state.pth`` into it once the shards are whole, then
   renames the folder to the checkpoint's name and moves ``latest.pth``
   (:func:`~.checkpoint.finish_sharded`).

A kill at any moment leaves the staging folder, never a checkpoint that is
not whole; ``--auto-resume`` does not look at staging folders, and the
run's first sharded save removes those left by a killed run.

Why not ``torch.distributed.checkpoint.async_save``: it runs the same
``save`` on a thread of its own after its own staging, and rank 0 must then
add its file and rename once that save is done, one write at a time. The
runner's checkpoint writer thread (:class:`~.checkpoint_writer.CheckpointWriter`)
already gives that order, the wait at the next save and the error at that
wait; the staging is :func:`~.checkpoint_writer.snapshot`, the same copy a
background file write takes.
"""

import glob
import os.path as osp
import shutil
from typing import Any, Dict, NamedTuple, Optional

import torch.distributed as dist

from .checkpoint import CheckpointError
from .checkpoint_writer import snapshot
from .sharded_checkpoint import checkpoint_group, local_state, write_shards

STAGE_PREFIX = '.sharded-tmp-'


class Shards(NamedTuple):
    """Shards written (or being written) to ``stage``; ``rest``: rank 0's part to add."""
    stage: str
    rest: Dict[str, Any]


def sharded_checkpoints(runner) -> bool:
    """Whether ``runner`` writes sharded checkpoints (``runner.sharded_checkpoints``, else auto).

    ``CheckpointHook(sharded=...)`` sets it; ``None`` (the default): on for a
    model wrapper that shards the weights (``collective_checkpoint``) on
    several ranks.
    """
    chosen = getattr(runner, 'sharded_checkpoints', None)
    if chosen is not None:
        return bool(chosen)
    return runner.world_size > 1 and getattr(runner.model_wrapper, 'collective_checkpoint', False)


def write_shards_of_this_point(runner, save_optimizer: bool, background: bool) -> Optional[Shards]:
    """Collective: every rank writes its shards of this point; rank 0 gets the :class:`Shards`.

    ``background``: the loop waits only while the shards are copied (a copy
    of this rank's part, in host memory until written); the writer thread
    writes them. Otherwise every rank returns once all shards are written.
    """
    if runner.work_dir is None:
        raise CheckpointError('sharded checkpoints are staged in the work dir: give the runner '
                              'a work_dir (or checkpoint_config.sharded=False)')
    group = _group(runner)
    # One folder per save, never reused in a run: two saves at one point (an epoch's last
    # iteration and its end, a preemption save) would otherwise share it, and a rank that
    # went on to the second could create it while rank 0 renamed the first away.
    runner._sharded_saves = getattr(runner, '_sharded_saves', 0) + 1
    stage = osp.join(runner.work_dir, STAGE_PREFIX + 'e{}-i{}-u{}'.format(*runner._point())
                     + f'-s{runner._sharded_saves}')
    state = local_state(runner.model_wrapper, runner.optimizer, save_optimizer)
    if background:
        state = snapshot(state)
        runner._checkpoint_writer.submit(stage, lambda: write_shards(state, stage, group))
    else:
        write_shards(state, stage, group)
    if runner.rank != 0:
        return None
    rest = runner.state_dict(save_optimizer, copy=True, tensors=False)
    rest['sharded'] = dict(keys=sorted(state), world_size=runner.world_size)
    return Shards(stage, rest)


def _group(runner) -> Any:
    """The checkpoint writes' own process group: made at the run's first sharded save.

    That first save (collective, like every one) also removes the staging
    folders a killed run left.
    """
    if not hasattr(runner, '_checkpoint_group'):
        runner._checkpoint_group = checkpoint_group()
        if runner.rank == 0:
            for stale in glob.glob(osp.join(runner.work_dir, STAGE_PREFIX + '*')):
                shutil.rmtree(stale, ignore_errors=True)
        if runner._checkpoint_group is not None:  # no rank stages before the removal is done
            dist.barrier(group=runner._checkpoint_group)
    return runner._checkpoint_group
