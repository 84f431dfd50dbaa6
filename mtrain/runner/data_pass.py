"""What fixed a pass's order, so that a run resumed mid-pass replays it exactly.

A loader the user built (``DataLoader(shuffle=True)``, a sampler with its own
generator or seed, a ``set_epoch`` sampler, numpy augmentation in workers)
draws its order when its iterator is created: a ``RandomSampler`` takes a seed
from the global torch RNG, the iterator takes its workers' base seed from the
loader's generator (or the global RNG), mmdet's ``GroupSampler`` shuffles with
the global numpy RNG. The RNG a checkpoint holds is the one from *after* those
draws, so re-creating the iterator at resume would draw another order.

So at the start of every pass the loops note what fixes it
(:func:`pass_start`): the global RNG states before the iterator is created
(torch's alone where torch's and mtrain's loader parts draw from no other),
the state of every ``torch.Generator`` the loader and its samplers hold, the
sampler's ``epoch``, and whether this pass started its worker processes. A checkpoint written during the pass holds that note
(:meth:`DataPass.checkpoint`); the resumed run restores it, re-creates the
iterator (same order, same worker seeds), skips the consumed batches, and
puts the checkpoint's own RNG back (:func:`begin_pass`). Skipping is by index
without loading when the loader loads in the main process (whatever the
pipeline draws from the global RNG is in the checkpoint's RNG); with worker
processes the consumed batches are loaded again and dropped, so that each
worker's random augmentation stream continues where it was.

Where this cannot be exact the run says so in one line (docs/robustness.md):
an ``IterableDataset``, a sampler that keeps its order in a stream object
(a generator attribute) beyond its first pass, persistent workers resumed in a
later pass (their augmentation streams restart), another world or batch size
with a sampler other than mtrain's.
"""

import logging
import weakref
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

import torch
from torch.utils.data import (BatchSampler, DataLoader, IterableDataset, RandomSampler,
                              SequentialSampler, SubsetRandomSampler, WeightedRandomSampler)
from torch.utils.data.distributed import DistributedSampler as TorchDistributedSampler

from ..datasets.samplers import DistributedSampler
from ..utils import get_dist_info
from .rng import capture_rng_state, get_rng_state, plain_rng_state, set_rng_state

#: Loader parts (by exact type) whose pass start draws from no global RNG but torch's: their
#: iterators take torch's RNG or a generator of their own, and worker processes reseed
#: python's and numpy's RNG from a base seed drawn from torch's (PyTorch >= 1.9).
_DRAW_FROM_TORCH_ONLY = frozenset({
    DataLoader, BatchSampler, SequentialSampler, RandomSampler, SubsetRandomSampler,
    WeightedRandomSampler, TorchDistributedSampler, DistributedSampler})

# How the checkpointed run drew its batches: (world size, samples per process).
Geometry = Tuple[int, int]
Note = Tuple[int, str]  # (logging level, one line)

_begun: 'weakref.WeakSet' = weakref.WeakSet()  # loaders a pass of which this process began


@dataclass
class DataPass:
    """One pass over a workflow loader (the train loader's, a val loader's) as this run took it.

    Attributes:
        epoch: the pass's number.
        index: the batch index this run began the pass at (0, or where it resumed).
        sample: the position in the pass's global order at ``index`` (all ranks).
        per_batch: samples one batch takes from that order on all ranks.
        start: what fixed the pass's order at its start (see :func:`pass_start`).
    """

    epoch: int
    index: int
    sample: int
    per_batch: int
    start: Dict[str, Any]

    def checkpoint(self, epoch: int, index: int) -> Dict[str, Any]:
        """The checkpoint's ``data`` entry after ``index`` batches of pass ``epoch``."""
        # Persistent workers, once started, run on: the next pass draws no base seed.
        state: Dict[str, Any] = dict(workers_running=self.start['persistent'])
        if epoch == self.epoch:  # else the pass is over: the next starts from the run's RNG
            state.update(epoch=epoch, samples=self.sample + (index - self.index) * self.per_batch,
                         pass_start=dict(self.start, rng=plain_rng_state(self.start['rng'])))
        return state


def _parts(loader: Any) -> List[Tuple[str, Any]]:
    """The loader and its samplers, each once."""
    batch_sampler = getattr(loader, 'batch_sampler', None)
    found, seen = [], set()
    for name, part in (('loader', loader), ('sampler', getattr(loader, 'sampler', None)),
                       ('batch_sampler', batch_sampler),
                       ('batch_sampler.sampler', getattr(batch_sampler, 'sampler', None))):
        if part is not None and id(part) not in seen:
            seen.add(id(part))
            found.append((name, part))
    return found


def _generators(loader: Any) -> Dict[str, torch.Generator]:
    found, seen = {}, set()
    for name, part in _parts(loader):
        generator = getattr(part, 'generator', None)
        if isinstance(generator, torch.Generator) and id(generator) not in seen:
            seen.add(id(generator))
            found[name] = generator
    return found


def _epoch_sampler(loader: Any) -> Any:
    for name, part in _parts(loader)[1:]:
        if hasattr(part, 'set_epoch') and isinstance(getattr(part, 'epoch', None), int):
            return part
    return None


def _may_draw_beyond_torch(loader: Any) -> bool:
    """Whether starting a pass over ``loader`` may draw from python's or numpy's global RNG.

    False only for torch's loader and samplers and mtrain's sampler, by exact
    type, over a map-style dataset (asked at every pass: a part replaced
    mid-run counts). A sampler of the user's own (mmdet's ``GroupSampler``
    shuffles with numpy) or an ``IterableDataset`` (read again when resuming
    in the main process) has all three states noted; numpy's alone costs
    30 µs, once per pass.
    """
    if isinstance(getattr(loader, 'dataset', None), IterableDataset):
        return True
    return any(type(part) not in _DRAW_FROM_TORCH_ONLY for _, part in _parts(loader))


def _persistent_workers(obj: Any) -> bool:
    return bool(getattr(obj, 'persistent_workers', False)) and getattr(obj, 'num_workers', 0) > 0


def pass_start(loader: Any, workers_running: bool = False) -> Dict[str, Any]:
    """What fixes the order of the pass about to begin (call right before ``iter(loader)``).

    ``fresh``: the pass draws its workers' base seed (not so for persistent
    workers already running, here or in the checkpointed run: ``workers_running``).
    """
    persistent = _persistent_workers(loader)
    sampler = _epoch_sampler(loader)
    try:
        first = loader not in _begun
        _begun.add(loader)
    except TypeError:  # not weak-referenceable
        first = False
    # (as the libraries return them, fresh copies; made plain when a checkpoint takes them)
    return dict(rng=capture_rng_state() if _may_draw_beyond_torch(loader)
                else {'torch': torch.get_rng_state()},
                generators={n: g.get_state() for n, g in _generators(loader).items()},
                epoch=None if sampler is None else sampler.epoch,
                fresh=not (persistent and (workers_running
                                           or getattr(loader, '_iterator', None) is not None)),
                persistent=persistent, first=first)


def _restore(loader: Any, start: Dict[str, Any]) -> None:
    sampler = _epoch_sampler(loader)
    if sampler is not None and start.get('epoch') is not None:
        sampler.set_epoch(start['epoch'])
    generators = _generators(loader)
    for name, state in start.get('generators', {}).items():
        if name in generators:
            generators[name].set_state(state)
    set_rng_state(start['rng'])


def _iterate(loader: Any, draws_base_seed: bool) -> Iterator:
    """``iter(loader)``; without ``draws_base_seed``, as a pass whose workers already ran.

    A persistent-workers loader draws its workers' base seed (from its
    generator or the global RNG) only when it first starts them; a resumed
    process starts them anew, so that draw goes to a throwaway generator and
    the sampler draws what it drew in the checkpointed run.
    """
    if draws_base_seed or getattr(loader, '_iterator', None) is not None \
            or not hasattr(loader, 'generator'):
        return iter(loader)
    own = loader.generator
    loader.generator = torch.Generator()
    try:
        return iter(loader)
    finally:
        loader.generator = own


def _skip(batches: Iterator, count: int, loader: Any) -> Iterator:
    """``batches`` after its first ``count``: by index where the loader loads in-process."""
    sampler_iter = getattr(batches, '_sampler_iter', None)  # torch's single-process iterator
    by_index = (sampler_iter is not None and getattr(loader, 'num_workers', 1) == 0
                and not isinstance(getattr(loader, 'dataset', None), IterableDataset))
    for _ in range(count):
        try:
            next(sampler_iter) if by_index else next(batches)
        except StopIteration:
            return iter(())
    if by_index:
        batches._num_yielded += count  # what a run that loaded them would have counted
    return batches


def _sequential(loader: Any) -> bool:
    """Whether the loader's order is fixed by its dataset alone (torch's sequential sampling)."""
    samplers = [part for _, part in _parts(loader)[1:]]
    return bool(samplers) and all(type(part) in (SequentialSampler, BatchSampler)
                                  for part in samplers)


def _describe(loader: Any, role: str) -> str:
    sampler = getattr(getattr(loader, 'batch_sampler', None), 'sampler', None) or \
        getattr(loader, 'batch_sampler', None) or getattr(loader, 'sampler', None)
    dataset = getattr(loader, 'dataset', None)
    what = type(dataset if dataset is not None else loader).__name__
    return f'the {role} loader ({what}' + (f', {type(sampler).__name__})' if sampler else ')')


def _unrecorded(loader: Any, role: str) -> List[Note]:
    """A checkpoint without the pass's note: only mtrain's and sequential samplers are exact."""
    if hasattr(getattr(loader, 'sampler', None), 'set_start_sample') or _sequential(loader):
        return []
    return [(logging.WARNING, f'{_describe(loader, role)}: the checkpoint does not say what '
             'ordered its pass (written by mmcv or an older mtrain), so the rest of the pass may '
             'hold other samples than the interrupted run would have seen')]


def _inexact(loader: Any, start: Dict[str, Any], role: str) -> List[Note]:
    """One line for each way the resumed pass will differ from the checkpointed one."""
    name, notes = _describe(loader, role), []
    if isinstance(getattr(loader, 'dataset', None), IterableDataset):
        notes.append((logging.WARNING, f'{name} reads an IterableDataset: the consumed batches are '
                      'read again and dropped, and the rest of the pass is the same only if the '
                      "dataset's stream depends on nothing but the RNG state at the pass start"))
    for _, part in _parts(loader)[1:]:
        streams = [k for k, v in vars(part).items() if hasattr(v, '__next__')] \
            if hasattr(part, '__dict__') else []
        if streams and not start.get('first', False):
            notes.append((logging.WARNING, f'{name}: its {type(part).__name__} keeps its order in '
                          f'a stream ({", ".join(streams)}) that a checkpoint cannot hold; the '
                          'resumed pass continues from where a new stream starts, not where '
                          'the interrupted run was'))
    if getattr(loader, 'num_workers', 0) > 0 and not start.get('fresh', True):
        notes.append((logging.WARNING, f'{name} keeps {loader.num_workers} worker processes '
                      'between passes: their random augmentation streams restart at the resumed '
                      'batch (the sample order is exact)'))
    return notes


def begin_pass(loader: Any, epoch: int, start: int = 0, saved: Optional[Geometry] = None,
               data: Optional[Dict[str, Any]] = None,
               role: str = 'train') -> Tuple[Iterator, DataPass, List[Note]]:
    """Begin pass ``epoch`` over ``loader``, after its first ``start`` batches when resuming.

    Args:
        loader: the train loader.
        epoch: the pass's number.
        start: batches of this pass the checkpointed run had consumed.
        saved: the ``(world size, samples per process)`` that consumed them
            (default: this run's).
        data: the checkpoint's ``data`` entry (:meth:`DataPass.checkpoint`).
        role: the loader's workflow phase (``'train'``, ``'val'``), for the notes.

    Returns:
        ``(batches, data_pass, notes)``: the iterator to take batches from,
        the :class:`DataPass` to checkpoint, and ``(level, line)`` notes to log.
    """
    batch_size, world_size = getattr(loader, 'batch_size', None), get_dist_info()[1]
    per_batch = (batch_size or 1) * world_size
    workers_running = bool(data and data.get('workers_running'))
    if start == 0:
        record = pass_start(loader, workers_running)
        return _iterate(loader, record['fresh']), DataPass(epoch, 0, 0, per_batch, record), []
    old_world, old_batch = saved or (world_size, batch_size)
    resumed = data.get('pass_start') if data and data.get('epoch') == epoch else None
    if resumed is None:  # the pass continues from the run's RNG state as it is now
        record, notes = pass_start(loader, workers_running), _unrecorded(loader, role)
        position = start * (old_batch or 1) * old_world
    else:
        record, notes, position = resumed, _inexact(loader, resumed, role), data['samples']
    by_sample = hasattr(getattr(loader, 'sampler', None), 'set_start_sample') and batch_size
    if not by_sample and (old_world, old_batch) != (world_size, batch_size):
        notes.append((logging.WARNING, _geometry_note(old_world, old_batch, world_size,
                                                      batch_size, start)))
    run_rng = get_rng_state(devices=False)
    try:
        if resumed is not None:
            _restore(loader, resumed)
        if by_sample:  # mtrain's sampler: continues at the exact sample on any geometry
            loader.sampler.set_start_sample(position)
            batches = _iterate(loader, record['fresh'])
            index, sample = position // per_batch, position
        else:
            batches = _skip(_iterate(loader, record['fresh']), start, loader)
            index, sample = start, start * per_batch
    finally:
        set_rng_state(run_rng)  # the training's own stream continues as checkpointed
    return batches, DataPass(epoch, index, sample, per_batch, record), notes


def _geometry_note(old_world: int, old_batch: int, world: int, batch: int, start: int) -> str:
    return (f'resume is not sample-exact: the checkpoint was written by {old_world} process(es) '
            f'x {old_batch} samples, this run has {world} x {batch} and its loader has no mtrain '
            f'sampler, so it skips {start} of its own batches')
