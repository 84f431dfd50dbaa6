"""Each rank's own random state in a checkpoint, and which one a resumed rank takes.

Ranks draw differently even when seeded alike: a transform that draws a
data-dependent number of randoms (mmseg's ``RandomCrop(cat_max_ratio=...)``
retries) on each rank's own samples, per-rank seeds (``use_rank_shift``), a
loader without a ``generator`` whose sampler or workers draw from a stream
that has diverged. A checkpoint holding rank 0's state only, restored on
every rank, sends rank 1 down rank 0's stream: the resumed run is not the
uninterrupted one.

So the checkpoint holds, besides rank 0's state at its top level (``rng``,
``data``, ``passes``, as one process writes them), every rank's in
``ranks``: gathered by :meth:`~.RunnerCheckpoints.gather_checkpoint_state`,
the collective every rank calls before rank 0 writes. On the same world size
rank ``r`` restores ``ranks[r]``; on another, ``ranks[r % len(ranks)]``, and
one line says that the draws are not the interrupted run's
(docs/robustness.md, "Per-rank random state").
"""

from typing import Any, Dict, Optional, Tuple

#: The checkpoint entries that differ from rank to rank.
RANK_LOCAL = ('rng', 'data', 'passes')


def own_rank_state(ckpt: Dict[str, Any], rank: int,
                   world_size: int) -> Tuple[Dict[str, Any], Optional[str]]:
    """This rank's ``rng``/``data``/``passes`` from ``ckpt``, and a line to log if not exact."""
    saved_world = (ckpt.get('progress') or {}).get('world_size', 1)
    ranks = ckpt.get('ranks')
    if ranks:
        return ranks[rank % len(ranks)], _other_world_note(len(ranks), world_size)
    own = {key: ckpt[key] for key in RANK_LOCAL if key in ckpt}
    if 'rng' not in own:
        return own, None  # mmcv's checkpoints hold no RNG: nothing to say about ranks
    if saved_world > 1:
        return own, (f'the checkpoint of a {saved_world}-process run holds the random state of '
                     'rank 0 only (written without runner.gather_checkpoint_state() on every '
                     'rank, or by an older mtrain): every rank restores it, so ranks whose '
                     'random draws differed continue on other streams than the interrupted run')
    return own, _other_world_note(1, world_size)


def _other_world_note(saved: int, world_size: int) -> Optional[str]:
    if saved == world_size:
        return None
    repeat = (f'; ranks {saved} to {world_size - 1} repeat the draws of ranks 0 to '
              f'{min(saved, world_size - saved) - 1}' if world_size > saved else '')
    return (f'the checkpoint holds the random states of {saved} rank(s), this run has '
            f'{world_size}: rank r restores those of rank r mod {saved}, so its random draws '
            f'(dropout, augmentation, unseeded shuffles) are not the interrupted run\'s{repeat}')
