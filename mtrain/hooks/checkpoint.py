"""Save checkpoints every N epochs or iterations, keeping the last K."""

import difflib
import inspect
import os.path as osp
from typing import List, Optional

from ..registry import HOOKS
from ..utils.errors import ConfigTypeError, refuse_url
from ..utils.files import remove_checkpoint
from .hook import Hook, periodic_stages


@HOOKS.register_module()
class CheckpointHook(Hook):
    """Write ``epoch_N.pth`` / ``iter_N.pth`` and move ``latest.pth`` to it.

    Config::

        checkpoint_config = dict(interval=1)                         # every epoch
        checkpoint_config = dict(interval=500, by_epoch=False, max_keep_ckpts=3)
        checkpoint_config = dict(interval=1, async_save=True)  # written in the background
        checkpoint_config = dict(interval=1, sharded=True)  # each rank writes its shards

    The file is written at the end of the stage (``runner.at_stage_end``),
    after the hooks of lower priority, so an epoch's checkpoint holds that
    epoch's evaluation (best score, early stopping) and log state; the
    priority still orders the hook among the others as in mmcv 1.x. A runner
    with its own loop (a 1.x subclass's ``train``) gets the file when mmcv
    writes it, in this hook's ``after_train_epoch`` / ``after_train_iter``,
    through its own ``save_checkpoint`` called with mmcv 1.x's arguments
    when that is all it takes.

    Args:
        interval: epochs (or iterations) between checkpoints; -1 saves only
            the last one (when ``save_last``).
        by_epoch: count epochs (else iterations, also under EpochBasedRunner,
            where a mid-epoch checkpoint resumes mid-epoch).
        save_optimizer: include the optimizer state.
        out_dir: folder (default: the work dir); another folder gets the work
            dir's name appended, ``out_dir/<work dir name>``, as in mmcv >= 1.3.16.
        max_keep_ckpts: keep this many newest files (-1: all). A file is only
            removed after a newer one was written whole.
        save_last: always save at the end of training.
        filename_tmpl: e.g. ``'ckpt_{}.pth'`` (default epoch_{}/iter_{}).
        create_symlink: move ``latest.pth`` to each new checkpoint.
        async_save: snapshot the state, then write it on a background thread
            while training goes on (crash-safe all the same; see
            :mod:`mtrain.runner.checkpoint_writer`). Worth it when writing
            takes long next to an iteration: a large model, a slow disk.
        sharded: write each checkpoint as a folder of every rank's shards
            (``torch.distributed.checkpoint``), which resumes on any number of
            ranks; see :mod:`mtrain.runner.sharded_writes`. ``None`` (default):
            sharded for a sharded (FSDP) model on several ranks, a file
            otherwise. ``tools/ckpt_consolidate.py`` turns one into a file.
        meta: added to each checkpoint's meta, as mmcv 1.x forwards it:
            ``meta=dict(CLASSES=..., mmcls_version=...)``, what 1.x
            ``tools/train.py`` scripts set (the runner's own meta wins on a
            shared key, as in mmcv).
        **kwargs: more ``runner.save_checkpoint`` keywords, passed on at
            every save as mmcv does; checked against its signature before the
            run (a config's unknown key is refused when the hook is built).
    """

    priority = 'NORMAL'

    def __init__(self, interval: int = -1, by_epoch: bool = True, save_optimizer: bool = True,
                 out_dir: Optional[str] = None, max_keep_ckpts: int = -1,
                 save_last: bool = True, filename_tmpl: Optional[str] = None,
                 create_symlink: bool = True, async_save: bool = False, sync_buffer: bool = False,
                 file_client_args: Optional[dict] = None, meta: Optional[dict] = None,
                 sharded: Optional[bool] = None, **kwargs) -> None:
        if not isinstance(interval, int) or interval == 0 or interval < -1:
            raise ValueError(f'checkpoint interval must be a positive integer or -1 (only the '
                             f'last), got {interval!r}')
        refuse_url(out_dir, 'CheckpointHook out_dir', key='checkpoint_config.out_dir')
        self.interval = interval
        self.by_epoch = by_epoch
        self.save_optimizer = save_optimizer
        self.out_dir = out_dir
        self._out_dir_arg = out_dir
        self.max_keep_ckpts = max_keep_ckpts
        self.save_last = save_last
        self.filename_tmpl = filename_tmpl
        self.create_symlink = create_symlink
        self.async_save = async_save
        self.sharded = sharded
        _refuse_typos(kwargs)
        # mmcv's name: the save_checkpoint keywords given beyond the hook's own
        self.args = dict(kwargs) if meta is None else dict(kwargs, meta=meta)
        # sync_buffer and file_client_args are mmcv 1.x options accepted for
        # compatibility: buffers are synchronised by DDP, files are local.

    def triggered_stages(self) -> List[str]:
        return periodic_stages(self, self.by_epoch)

    def before_run(self, runner) -> None:
        # mmcv >= 1.3.16: another out_dir gets the work dir's name appended
        # (out_dir/<work dir name>); computed from the argument, so a second run() agrees.
        root = self._out_dir_arg or runner.work_dir
        if root != runner.work_dir and runner.work_dir is not None:
            root = osp.join(root, osp.basename(runner.work_dir.rstrip(osp.sep)))
        self.out_dir = root
        _check_save_arguments(runner, self.args)
        own_save = not _takes_mtrain_keywords(runner.save_checkpoint)
        if self.async_save and own_save:
            runner.logger.warning(f'async_save is ignored: {type(runner).__name__}.'
                                  "save_checkpoint takes mmcv 1.x's arguments only, so "
                                  'checkpoints are written in the foreground')
        if self.sharded is not None or own_save:  # a 1.x save_checkpoint writes its own file
            runner.sharded_checkpoints = bool(self.sharded) and not own_save

    def after_train_epoch(self, runner) -> None:
        """Collective: every rank calls it, as in mmcv; saves when due."""
        if self.by_epoch and (self.every_n_epochs(runner, self.interval)
                              or (self.save_last and self.is_last_epoch(runner))):
            runner.at_stage_end(lambda: self._write(runner))

    def after_train_iter(self, runner) -> None:
        """Collective: every rank calls it, as in mmcv; saves when due."""
        if not self.by_epoch and (self.every_n_iters(runner, self.interval)
                                  or (self.save_last and self.is_last_iter(runner))):
            runner.at_stage_end(lambda: self._write(runner))

    def _write(self, runner) -> None:
        """Collective (mtrain's own): every rank gathers the state, then :meth:`_save_checkpoint`.

        Under mtrain's loops it runs once the stage's later hooks have run
        (EvalHook, early stopping, loggers), so the file holds the state a
        resumed run must start from; under a runner with its own loop (a 1.x
        subclass), at once, when mmcv writes (``runner.at_stage_end``).
        """
        runner.gather_checkpoint_state(self.save_optimizer,  # every rank; rank 0 writes
                                       background=self.async_save)
        self._save_checkpoint(runner)

    def _save_checkpoint(self, runner) -> None:
        """Rank-local: write the file on rank 0, note ``last_ckpt``, drop files beyond the last K.

        mmcv 1.x's override point, called on every rank as there (mmcv's own
        is ``@master_only``: this one returns at once on the other ranks). A
        runner's ``save_checkpoint`` that takes mmcv 1.x's arguments only (a
        1.x subclass's own) is called as mmcv calls it, and writes in the
        foreground.
        """
        if runner.rank != 0:
            return
        number = runner.epoch + 1 if self.by_epoch else runner.iter + 1
        tmpl = self.filename_tmpl or ('epoch_{}.pth' if self.by_epoch else 'iter_{}.pth')
        path = osp.join(self.out_dir, tmpl.format(number))
        background = False
        if _takes_mtrain_keywords(runner.save_checkpoint):
            background = self.async_save
            runner.save_checkpoint(
                self.out_dir, filename_tmpl=tmpl.format(number),
                save_optimizer=self.save_optimizer, create_symlink=self.create_symlink,
                background=background,
                on_written=lambda path: self._on_written(runner, path, number, tmpl), **self.args)
        else:  # mmcv's call: the template, which the runner formats with its own counter
            given = {} if self.filename_tmpl is None else {'filename_tmpl': self.filename_tmpl}
            runner.save_checkpoint(self.out_dir, save_optimizer=self.save_optimizer,
                                   create_symlink=self.create_symlink, **given, **self.args)
            self._drop_old(number, tmpl)
        runner.logger.info(f'{"Saving" if background else "Saved"} checkpoint {path}')
        runner.meta.setdefault('hook_msgs', {})['last_ckpt'] = path

    def _on_written(self, runner, path: str, number: int, tmpl: str) -> None:
        """Once ``path`` is whole: report it, and drop files beyond ``max_keep_ckpts``."""
        if self.async_save:
            runner.logger.info(f'Saved checkpoint {path}')
        self._drop_old(number, tmpl)

    def _drop_old(self, number: int, tmpl: str) -> None:
        """Remove the files beyond ``max_keep_ckpts`` (the newest, ``number``, is whole)."""
        if self.max_keep_ckpts > 0:
            step = self.interval if self.interval > 0 else 1
            for old in range(number - self.max_keep_ckpts * step, 0, -step):
                old_path = osp.join(self.out_dir, tmpl.format(old))
                if not osp.exists(old_path):
                    break
                remove_checkpoint(old_path)  # a file, or a sharded checkpoint's folder


def _refuse_typos(kwargs) -> None:
    """A keyword that is a near miss of the hook's own (``intervall``) fails at once, named."""
    own = [n for n in inspect.signature(CheckpointHook.__init__).parameters
           if n not in ('self', 'kwargs')]
    for name in kwargs:
        near = difflib.get_close_matches(name, own, n=1, cutoff=0.85)  # a typo, not a new key
        if near:
            raise ConfigTypeError(f"CheckpointHook does not accept the argument '{name}'. "
                                  f"Did you mean '{near[0]}'?", key=name)


def _takes_mtrain_keywords(save_checkpoint) -> bool:
    """Whether ``save_checkpoint`` names mtrain's ``background`` and ``on_written``.

    A 1.x runner subclass's own ``save_checkpoint(out_dir, filename_tmpl,
    save_optimizer, meta, create_symlink)`` does not: it is called as mmcv calls it.
    """
    taken = inspect.signature(save_checkpoint).parameters
    return 'background' in taken and 'on_written' in taken


def _check_save_arguments(runner, args) -> None:
    """Refuse keywords that ``runner.save_checkpoint`` does not take, before the first epoch."""
    taken = inspect.signature(runner.save_checkpoint).parameters
    if any(p.kind is p.VAR_KEYWORD for p in taken.values()):
        return
    fixed = ('out_dir', 'filename_tmpl', 'save_optimizer', 'create_symlink', 'background',
             'on_written')
    unknown = sorted(k for k in args if k not in taken or k in fixed)
    if unknown:
        usable = ', '.join(k for k in taken if k not in fixed)
        raise TypeError(f'CheckpointHook got keyword(s) {", ".join(unknown)} that '
                        f'{type(runner).__name__}.save_checkpoint does not take (or that '
                        f'CheckpointHook sets itself); it forwards only: {usable}. Remove them '
                        'from checkpoint_config.')
