"""Gather every rank's evaluation results on rank 0, in dataset order.

Both collectors assume each rank evaluated its ``DistributedSampler(shuffle=False)``
share: rank ``r`` holds samples ``r, r + W, r + 2W, ...`` and every share is
padded to one length. Interleaving the shares restores the dataset order and
the first ``size`` items are each sample exactly once (as mmcv 1.x's
``collect_results_cpu``/``collect_results_gpu``).

A share is a list of per-sample results (any picklable objects: per-class
arrays, dicts) or one tensor whose rows are the samples (mtrain's contract).
Only rank 0 gets the results back; the other ranks get None.
"""

import os
import os.path as osp
import pickle
import shutil
import tempfile
from typing import Any, List, Optional, Sequence

import torch
import torch.distributed as dist

from ..utils import get_dist_info


def collect_results_cpu(part: Any, size: int, tmpdir: Optional[str] = None) -> Optional[Any]:
    """Gather through files: each rank pickles its share into ``tmpdir``, rank 0 reads all.

    ``tmpdir`` must be on a filesystem every rank sees (one shared by all nodes in a
    multi-node job). Without one, rank 0 makes a fresh folder under ``.dist_test`` in
    the working directory (as mmcv) and tells the others its name. The folder is
    removed once rank 0 has read it.
    """
    rank, world_size = get_dist_info()
    if world_size == 1:
        return _interleave([part], size)
    if tmpdir is None:
        if rank == 0:
            os.makedirs('.dist_test', exist_ok=True)
            tmpdir = tempfile.mkdtemp(dir='.dist_test')
        holder = [tmpdir]
        dist.broadcast_object_list(holder, src=0)
        tmpdir = holder[0]
    os.makedirs(tmpdir, exist_ok=True)
    with open(osp.join(tmpdir, f'part_{rank}.pkl'), 'wb') as f:
        pickle.dump(part, f)
    dist.barrier()  # every share is on disk
    if rank != 0:
        return None
    parts = []
    for i in range(world_size):
        with open(osp.join(tmpdir, f'part_{i}.pkl'), 'rb') as f:
            parts.append(pickle.load(f))
    shutil.rmtree(tmpdir)
    return _interleave(parts, size)


def collect_results_gpu(part: Any, size: int) -> Optional[Any]:
    """Gather through the process group: an all_gather of each rank's pickled share.

    Under NCCL the bytes travel over the GPUs (mmcv's ``gpu_collect=True``);
    under gloo over the network. No shared filesystem is needed.
    """
    rank, world_size = get_dist_info()
    if world_size == 1:
        return _interleave([part], size)
    parts: List[Any] = [None] * world_size
    dist.all_gather_object(parts, part)
    return _interleave(parts, size) if rank == 0 else None


def _interleave(parts: Sequence[Any], size: int) -> Any:
    """Sample ``i`` of rank ``r`` is dataset item ``i * W + r``; drop the sampler's padding.

    An empty share (a rank that got no sample) is left out, as mmcv does.
    """
    parts = [p for p in parts if len(p)]
    if not parts:
        return []
    lengths = {len(p) for p in parts}
    if len(lengths) != 1 or len(parts) * next(iter(lengths)) < size:
        raise RuntimeError(
            f'[collect_results] ranks hold {[len(p) for p in parts]} results for {size} '
            f'samples; expected {-(-size // len(parts))} on every rank, as '
            'DistributedSampler(shuffle=False) gives. Evaluate with the loader mtrain '
            'builds for data.val/test.')
    if isinstance(parts[0], torch.Tensor):
        return torch.stack(list(parts), dim=1).flatten(0, 1)[:size]
    ordered = [item for items in zip(*parts) for item in items]
    return ordered[:size]
