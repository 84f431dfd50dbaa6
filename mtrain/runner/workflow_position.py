"""Where a run is in its workflow, so that a resumed run continues right there.

``workflow=[('train', 1), ('val', 1)]`` takes a val pass after every train epoch
(``EpochBasedRunner``), or a val iteration after every train iteration
(``IterBasedRunner``). A checkpoint written at the end of a train epoch
(``epoch_1.pth``) comes *before* that epoch's val pass, and the uninterrupted
run then takes the val pass, whose start draws from the global RNG (a loader
without a ``generator``, as 1.x codebases build them, draws its workers' base
seed when its iterator is created, ``num_workers=0`` too), before its next
train iteration. mmcv 1.x's loops start a resumed run at the workflow's first
phase: the val pass is skipped, and the training continues from another RNG
state (another shuffle, other dropout masks).

So mtrain's loops keep their position, ``(phase, done)``: the index of the
phase in the workflow and how many of its epochs (iterations) are complete.
A checkpoint holds it (``progress['phase']``, with ``progress['workflow']``)
and the resumed run starts its first cycle there: it takes the val pass the
interrupted run took after the checkpoint, and with it every draw that pass
made, whatever drew (the loader, its sampler, the pipeline, the model). Each
non-train loader's own pass (where it is, what ordered it) is in the
checkpoint as the train loader's is (``passes``, see :mod:`.data_pass`), so a
val loader inside its pass under ``IterBasedRunner`` continues at its next batch.
"""

from typing import Any, Dict, List, Optional, Sequence, Tuple

from .data_pass import DataPass

Position = Tuple[int, int]  # (phase index in the workflow, its epochs/iterations done)
START: Position = (0, 0)


def normalize(position: Sequence[int], workflow: Sequence[Tuple[str, int]]) -> Position:
    """``position`` with finished phases stepped over; a finished cycle is :data:`START`."""
    index, done = int(position[0]), int(position[1])
    while index < len(workflow) and done >= workflow[index][1]:
        index, done = index + 1, 0
    return START if index >= len(workflow) else (index, done)


def plain_workflow(workflow: Sequence[Tuple[str, int]]) -> List[List[Any]]:
    return [[mode, count] for mode, count in workflow]


def resume_start(progress: Optional[Dict[str, Any]],
                 workflow: Sequence[Tuple[str, int]]) -> Tuple[Position, Optional[str]]:
    """Where the first cycle of a resumed run starts, and a line to log when it is not exact.

    ``progress`` is the checkpoint's (None: not resumed). A checkpoint from
    mmcv or an older mtrain has no position: the run starts at the first phase,
    as mmcv's does, and says so when a non-train phase might have been skipped.
    """
    if progress is None:
        return START, None
    saved = progress.get('phase')
    if saved is None:
        if any(mode != 'train' for mode, _ in workflow):
            return START, ('the checkpoint does not say where in the workflow it was written '
                           '(mmcv or an older mtrain): the run starts at its first phase, so a '
                           'val pass the interrupted run took after the checkpoint is skipped '
                           'and the random draws after it differ')
        return START, None
    saved_workflow = progress.get('workflow')
    if saved_workflow is not None and plain_workflow(saved_workflow) != plain_workflow(workflow):
        position = normalize(saved, saved_workflow)
        note = None if position == START else (
            f'the checkpoint was written in phase {position[0]} of workflow '
            f'{[tuple(p) for p in saved_workflow]}, this run has {list(map(tuple, workflow))}: '
            'it starts at its first phase, so the run differs from the interrupted one')
        return START, note
    return normalize(saved, workflow), None


def phase_pass_state(data_pass: DataPass, consumed: int, world_size: int) -> Dict[str, Any]:
    """The checkpoint's entry (in ``passes``) for a non-train loader ``consumed`` batches in."""
    return dict(epoch=data_pass.epoch, consumed=consumed,
                samples_per_gpu=data_pass.per_batch // world_size,
                data=data_pass.checkpoint(data_pass.epoch, consumed))


def resumed_pass_args(entry: Optional[Dict[str, Any]], saved_world: int) -> tuple:
    """``(epoch, start, saved geometry, data)`` for :func:`.data_pass.begin_pass` from an entry."""
    if entry is None:
        return 0, 0, None, None
    return (entry['epoch'], entry['consumed'], (saved_world, entry['samples_per_gpu']),
            entry['data'])
