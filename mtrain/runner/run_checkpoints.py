"""The runner's checkpoints: what a run saves, and how a run resumes from it.

A mixin of :class:`~mtrain.runner.BaseRunner` (kept apart so the runner's
own file stays about the loop's state and hooks). The names and arguments are
mmcv 1.x's ``save_checkpoint`` / ``load_checkpoint`` / ``resume``; what is
saved is everything the rest of the run depends on (weights, optimizer, each
stateful hook, the log buffer, every rank's RNG, the exact position in the
data and in the workflow).
"""

import os.path as osp
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .. import __version__
from ..utils.dist import gather_to_main
from .checkpoint import (DEFAULT_REVISE_KEYS, CheckpointError, finish_sharded, load_checkpoint,
                         load_checkpoint_file, load_optimizer_state, model_state,
                         optimizer_state, save_checkpoint_file, update_latest_link,
                         weights_to_cpu)
from .checkpoint_writer import snapshot
from .sharded_checkpoint import STATE_FILE, is_sharded, read_shards
from .sharded_writes import Shards, sharded_checkpoints, write_shards_of_this_point
from .iter_loader import saved_geometry
from .rank_state import own_rank_state
from .rng import get_rng_state, set_rng_state
from .workflow_position import (START, Position, phase_pass_state, plain_workflow,
                                resume_start, resumed_pass_args)


def drains_stage_end(train: Callable) -> Callable:
    """Mark a loop's ``train``: it runs what :meth:`RunnerCheckpoints.at_stage_end` queued.

    After ``after_train_iter`` and ``after_train_epoch`` it calls
    ``runner._end_stage()`` before the counters move on.
    """
    train.drains_stage_end = True
    return train


class RunnerCheckpoints:
    """``state_dict`` / ``save_checkpoint`` / ``load_checkpoint`` / ``resume`` of a runner."""

    def _progress(self) -> Dict[str, int]:
        """Where a resumed run continues (set by the loops as iterations finish).

        The loops keep it as an ``(epoch, inner_iter, iter)`` tuple: cheap to
        set every iteration.
        """
        epoch, inner_iter, iteration = getattr(self, '_resume_point',
                                               (self._epoch, 0, self._iter))
        return dict(epoch=epoch, inner_iter=inner_iter, iter=iteration)

    def state_dict(self, save_optimizer: bool = True, copy: bool = False,
                   tensors: bool = True) -> Dict[str, Any]:
        """Everything the rest of the run depends on, as a checkpoint dict.

        ``copy``: share no tensor or container with the live run (for a
        checkpoint written in the background while training goes on).
        ``tensors=False``: without the weights and optimizer state (what a
        sharded checkpoint's ``mtrain_state.pth`` holds; the shards hold them).
        """
        progress = self._progress()
        hook_states = {name: state for name, state in self._named_hook_states()}
        ckpt = {
            'meta': dict(self.meta, epoch=progress['epoch'], iter=progress['iter'],
                         time=time.asctime(), mtrain_version=__version__),
            'state_dict': model_state(self.model_wrapper) if tensors else None,
            'progress': dict(progress, num_updates=self.num_updates, world_size=self.world_size,
                             samples_per_gpu=self._samples_per_gpu),
            'hooks': hook_states,
            'log_buffer': self.log_buffer.state_dict(),
        }
        workflow = getattr(self, '_workflow', None)
        if workflow is not None:  # where the loop is in it (workflow_position.py)
            ckpt['progress'].update(phase=list(getattr(self, '_phase', START)),
                                    workflow=plain_workflow(workflow))
        ckpt.update(self._rank_state(progress))  # this rank's (all ranks': see rank_state.py)
        if not tensors:
            del ckpt['state_dict']
        elif save_optimizer and self.optimizer is not None:
            ckpt['optimizer'] = optimizer_state(self.model_wrapper, self.optimizer)
        if copy:  # every tensor copied to the host once, GPU or not
            return snapshot(ckpt)
        ckpt['state_dict'] = weights_to_cpu(ckpt['state_dict'])
        return ckpt

    def _rank_state(self, progress: Dict[str, int]) -> Dict[str, Any]:
        """What differs from rank to rank: the RNG, and what ordered each loader's pass.

        ``data``: the train loader's pass (data_pass.py); ``passes``: each
        other loader's, by its index in the workflow. Rank-local.
        """
        state: Dict[str, Any] = {'rng': get_rng_state()}
        if getattr(self, '_data_pass', None) is not None:
            state['data'] = self._data_pass.checkpoint(progress['epoch'], progress['inner_iter'])
        passes = getattr(self, '_phase_passes', None)
        if passes:
            state['passes'] = {index: phase_pass_state(data_pass, consumed, self.world_size)
                               for index, (data_pass, consumed) in passes.items()}
        return state

    def _named_hook_states(self):
        for key, hook in self._named_hooks():
            state = hook.state_dict()
            if state:
                yield key, state

    def gather_checkpoint_state(self, save_optimizer: bool = True,
                                background: bool = False) -> None:
        """Collect what only every rank together can give a checkpoint of this point.

        A collective: every rank calls it, then rank 0 calls
        :meth:`save_checkpoint`. It gathers every rank's RNG and data-order
        state (:mod:`.rank_state`), the ranks' half-accumulated gradients
        inside an accumulation window and, for a sharded (FSDP) model, the
        full state. ``CheckpointHook``, the preemption save and
        ``EvalHook``'s best checkpoint call it; :meth:`save_checkpoint` itself
        is rank-local, so a 1.x hook that saves on rank 0 only (``@master_only``)
        never waits for the other ranks.

        With sharded checkpoints (:mod:`.sharded_writes`) every rank writes its
        shards here, into a staging folder that :meth:`save_checkpoint` turns
        into the checkpoint; ``background``: the shards are copied now and
        written on the checkpoint writer thread.
        """
        self.wait_for_checkpoint()
        if self.optim_step is not None:
            self.optim_step.gather_window()
        state = ranks = None
        if self.world_size > 1:
            ranks = gather_to_main(self._rank_state(self._progress()))
        if sharded_checkpoints(self):
            state = write_shards_of_this_point(self, save_optimizer, background)
        elif self.world_size > 1 and getattr(self.model_wrapper, 'collective_checkpoint', False):
            # The gather takes every rank; rank 0 keeps a host copy until it writes.
            state = self.state_dict(save_optimizer, copy=self.rank == 0)
        self._gathered = (self._point(), save_optimizer, state if self.rank == 0 else None, ranks)

    def _point(self) -> Tuple[int, int, int]:
        progress = self._progress()
        return progress['epoch'], progress['iter'], self.num_updates

    def save_checkpoint(self, out_dir: str, filename_tmpl: Optional[str] = None,
                        save_optimizer: bool = True, meta: Optional[Dict] = None,
                        create_symlink: bool = True, background: bool = False,
                        on_written: Optional[Callable[[str], None]] = None) -> Optional[str]:
        """Write a checkpoint (on rank 0; other ranks return None) and move ``latest.pth`` to it.

        As mmcv 1.7.2, ``filename_tmpl`` (default ``epoch_{}.pth`` /
        ``iter_{}.pth`` by runner) is formatted with ``runner.epoch + 1`` under
        ``EpochBasedRunner`` and ``runner.iter + 1`` under ``IterBasedRunner``,
        and the checkpoint's meta is ``meta`` updated with ``runner.meta``, then
        the run's position. Rank-local: see :meth:`gather_checkpoint_state`
        for what a checkpoint written on rank 0 alone lacks under DDP.
        ``background``: snapshot the state now, write it on the checkpoint
        writer thread (see :mod:`.checkpoint_writer`); ``on_written(path)``
        runs once the file is whole (e.g. to remove older ones).
        """
        if meta is not None and not isinstance(meta, dict):
            raise TypeError(f'meta should be a dict or None, but got {type(meta)}')
        if self.rank != 0:
            return None
        shards = self._gathered_shards(save_optimizer)
        if shards is None:  # (a sharded one is finished after its shards, on the same thread)
            self.wait_for_checkpoint()  # one write at a time: latest.pth only moves forward
        tmpl = filename_tmpl or self.default_ckpt_tmpl
        by_iter = self.default_ckpt_tmpl.startswith('iter')
        path = osp.join(out_dir, tmpl.format(self._iter + 1 if by_iter else self._epoch + 1))
        self.call_hook('before_save_checkpoint')
        ckpt = (shards.rest if shards is not None
                else self._checkpoint_of_this_point(save_optimizer, background))
        ckpt['meta'] = dict(meta or {}, **ckpt['meta'])

        def write() -> None:
            if shards is None:
                save_checkpoint_file(ckpt, path)
            else:
                finish_sharded(shards.stage, ckpt, path)
            if create_symlink:
                update_latest_link(path, osp.join(out_dir, 'latest.pth'))
            if on_written is not None:
                on_written(path)

        if background:
            (self._checkpoint_writer.submit if shards is None
             else self._checkpoint_writer.then)(path, write)
        else:
            self.wait_for_checkpoint()  # the shards, if they were written in the background
            write()
        return path

    def _gathered_shards(self, save_optimizer: bool) -> Optional[Shards]:
        """The shards every rank wrote for this point, if any (taken: one checkpoint of them)."""
        point, gathered_optimizer, state, ranks = getattr(self, '_gathered', (None,) * 4)
        if (not isinstance(state, Shards) or point != self._point()
                or gathered_optimizer != save_optimizer):
            return None
        self._gathered = (point, gathered_optimizer, None, ranks)
        if ranks is not None:
            state.rest['ranks'] = ranks  # every rank's RNG and data-order state (rank_state.py)
        return state

    def _checkpoint_of_this_point(self, save_optimizer: bool, copy: bool) -> Dict[str, Any]:
        """The state to write: gathered by every rank for this point, or rank 0's own."""
        point, gathered_optimizer, state, ranks = getattr(self, '_gathered', (None,) * 4)
        gathered = point == self._point() and gathered_optimizer == save_optimizer
        if gathered and state is not None:
            self._gathered = (point, gathered_optimizer, None, ranks)  # written once, then let go
            ckpt = state
        elif self.world_size > 1 and getattr(self.model_wrapper, 'collective_checkpoint', False):
            raise CheckpointError(
                'a sharded (FSDP) model needs every rank to write a checkpoint: call '
                'runner.gather_checkpoint_state() on every rank first (CheckpointHook does), '
                'then runner.save_checkpoint(...) on rank 0')
        else:
            ckpt = self.state_dict(save_optimizer, copy=copy)
        if not gathered:
            _drop_other_ranks_window(ckpt, self)
        elif ranks is not None:
            ckpt['ranks'] = ranks  # every rank's RNG and data-order state (rank_state.py)
        return ckpt

    def at_stage_end(self, fn: Callable[[], Any]) -> None:
        """Call ``fn`` once every hook of the current stage has run; at once under another loop.

        For a checkpoint that must hold what later hooks of the same stage
        change: ``CheckpointHook`` (NORMAL) writes the epoch's file after
        ``EvalHook`` (LOW) has evaluated, so it holds the best score and the
        early-stopping state of that epoch (docs/robustness.md). Only mtrain's
        own ``train`` (marked :func:`drains_stage_end`) calls ``fn`` at the
        stage's end; a runner subclass with its own ``train`` (a 1.x runner
        alternating optimizers) never would, so ``fn`` runs now, which is when
        mmcv's hooks act.
        """
        if getattr(getattr(type(self), 'train', None), 'drains_stage_end', False):
            self._stage_end.append(fn)
        else:
            fn()

    def _end_stage(self) -> None:
        """Run what hooks deferred to the end of the stage (the loops call it)."""
        while self._stage_end:
            self._stage_end.pop(0)()

    def wait_for_checkpoint(self) -> None:
        """Wait until a checkpoint being written in the background is whole (or raise its error)."""
        self._checkpoint_writer.wait()

    def _end_run(self) -> None:
        """Finish a background checkpoint write, then call ``after_run`` (also after an error)."""
        try:
            self.wait_for_checkpoint()
        finally:
            try:
                self.call_hook('after_run')
            finally:
                self._stop_signals.restore()

    def load_checkpoint(self, filename: str, map_location: Any = 'cpu', strict: bool = False,
                        revise_keys: Sequence[Tuple[str, str]] = DEFAULT_REVISE_KEYS,
                        trusted: bool = False) -> Dict[str, Any]:
        """Load model weights only (``load_from``); returns the checkpoint.

        Not strict (the default, for fine-tuning): every tensor that fits is
        loaded; missing, unexpected and shape-mismatched keys are logged as
        one warning. ``strict=True``: any of them is a :class:`CheckpointError`.
        """
        if map_location == 'default':
            # mmcv's 'default' is the current GPU. The CPU ends the same: weights and optimizer
            # state are copied to the parameters' device, and the RNG state must stay on the CPU.
            map_location = 'cpu'
        try:
            ckpt = load_checkpoint(self.model_wrapper, filename, map_location, strict, self.logger,
                                   revise_keys, trusted)
        except RuntimeError as e:
            if isinstance(e, CheckpointError):
                raise
            raise CheckpointError(f'{filename} does not fit the model: {e}\nTo start from the '
                                  'weights that fit, use load_from (not resume_from).') from e
        self.logger.info(f'load checkpoint from {filename}')
        return ckpt

    def resume(self, checkpoint: str, resume_optimizer: bool = True,
               map_location: Any = 'default', trusted: bool = False) -> None:
        """Continue a run exactly where ``checkpoint`` left it (the model must fit it exactly).

        A checkpoint written by mmcv 1.x (no ``progress``) resumes from its
        ``meta['epoch']`` / ``meta['iter']`` at the start of that epoch.
        ``runner.meta`` becomes the checkpoint's ``meta``, as in mmcv 1.7.2.
        """
        if is_sharded(checkpoint):
            ckpt = self._load_sharded(checkpoint, resume_optimizer, trusted)
        else:
            ckpt = self.load_checkpoint(checkpoint, map_location, strict=True, trusted=trusted)
        progress = ckpt.get('progress') or _mmcv_progress(ckpt, checkpoint)
        self._epoch, self._iter = progress['epoch'], progress['iter']
        self._start_inner_iter = progress['inner_iter']
        self._resume_point = (progress['epoch'], progress['inner_iter'], progress['iter'])
        self.num_updates = progress['num_updates']
        self._resume_geometry = saved_geometry(progress, self.world_size, self.logger)
        own, note = own_rank_state(ckpt, self.rank, self.world_size)
        if note is not None:
            self.logger.warning(note)
        self._resume_data = own.get('data')
        # Where the loop resumes in the workflow, and the other loaders' passes (run() reads them).
        self._resume_progress, self._resume_passes = progress, own.get('passes') or {}
        # mmcv 1.7.2's contract: the run's meta becomes the checkpoint's (its hook_msgs, the keys
        # a 1.x hook kept there, what TextLoggerHook writes first in the resumed run's log).
        self.meta = dict(ckpt.get('meta') or {})
        if resume_optimizer and 'optimizer' in ckpt and self.optimizer is not None:
            load_optimizer_state(self.model_wrapper, self.optimizer, ckpt['optimizer'])
        states = dict(self._named_hooks())
        for key, state in ckpt.get('hooks', {}).items():
            if key in states:
                states[key].load_state_dict(state)
            else:
                self.logger.warning(f'checkpoint has state for hook {key}, which this run '
                                    'does not have; it is ignored')
        self.log_buffer.load_state_dict(ckpt.get('log_buffer', {}))
        if 'rng' in own:
            set_rng_state(own['rng'])
        self.logger.info(f'resumed from {checkpoint}: epoch {self._epoch}, '
                         f'iter {self._iter}, update {self.num_updates}')

    def _load_sharded(self, folder: str, with_optimizer: bool, trusted: bool) -> Dict[str, Any]:
        """Read a sharded checkpoint's weights (and optimizer) into this run, resharded.

        Collective on several ranks. Returns rank 0's file (the checkpoint
        minus its tensors); the optimizer state is loaded here already.
        """
        ckpt = load_checkpoint_file(osp.join(folder, STATE_FILE), 'cpu', trusted)
        saved = ckpt.get('sharded', {}).get('keys', ())
        try:
            read_shards(folder, self.model_wrapper, self.optimizer,
                        with_optimizer and 'optimizer' in saved and self.optimizer is not None)
        except (RuntimeError, ValueError, KeyError) as e:
            raise CheckpointError(f'{folder} does not fit the model: {e}\nTo start from the '
                                  'weights that fit, use load_from (not resume_from).') from e
        self.logger.info(f'load checkpoint from {folder}')
        return ckpt

    def _start_workflow(self, workflow: Sequence[Tuple[str, int]]) -> Position:
        """Where the loop's first cycle starts: the checkpoint's position after a resume.

        The loops call it once per ``run()``; see :mod:`.workflow_position`.
        """
        self._workflow = list(workflow)
        start, note = resume_start(getattr(self, '_resume_progress', None), workflow)
        if note is not None:
            self.logger.warning(note)
        self._resume_progress, self._phase, self._phase_passes = None, start, {}
        return start

    def _resumed_pass(self, index: int) -> tuple:
        """``(epoch, start, saved geometry, data)`` of workflow loader ``index`` at the resume.

        Once: the loader's first pass after the resume takes it (a non-train loader; the
        train loader's is ``_resume_data``).
        """
        entry = getattr(self, '_resume_passes', {}).pop(index, None)
        return resumed_pass_args(entry, (self._resume_geometry or (self.world_size,))[0])

    def _log_notes(self, notes: List[Tuple[int, str]]) -> None:
        """Log a resumed pass's ``(level, line)`` notes (:func:`.data_pass.begin_pass`), once."""
        for level, note in notes:
            self.logger.log(level, note)
        notes.clear()

    def _named_hooks(self):
        """``(key, hook)`` pairs; a second hook of the same class is ``Name#2``."""
        seen: Dict[str, int] = {}
        for hook in self._hooks:
            name = type(hook).__name__
            seen[name] = seen.get(name, 0) + 1
            yield (name if seen[name] == 1 else f'{name}#{seen[name]}'), hook


def _drop_other_ranks_window(ckpt: Dict[str, Any], runner) -> None:
    """A checkpoint written without a gather at this point holds no other rank's gradients.

    Whatever an earlier gather collected belongs to another point, so it is
    left out; inside an accumulation window under DDP the file then holds
    rank 0's half-window only, which a warning says.
    """
    for state in ckpt['hooks'].values():
        if isinstance(state, dict) and 'grads_by_rank' in state:
            del state['grads_by_rank']
    step = runner.optim_step
    if runner.world_size > 1 and step is not None and step.window_in_progress:
        runner.logger.warning(
            'checkpoint written on rank 0 alone inside an accumulation window: it holds '
            "rank 0's half-accumulated gradients only. Call runner.gather_checkpoint_state() "
            'on every rank before save_checkpoint (CheckpointHook does) to keep them all.')


def _mmcv_progress(ckpt: Dict[str, Any], path: str) -> Dict[str, int]:
    """Where an mmcv 1.x checkpoint (``meta`` epoch/iter, no ``progress``) resumes."""
    meta = ckpt.get('meta') or {}
    if 'epoch' not in meta or 'iter' not in meta:
        raise CheckpointError(f'{path} has no run progress (no meta epoch/iter); use '
                              '--load-from to start from its weights')
    return dict(epoch=meta['epoch'], iter=meta['iter'], inner_iter=0, num_updates=meta['iter'])
