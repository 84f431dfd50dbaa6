"""The epoch loop: ``runner=dict(type='EpochBasedRunner', max_epochs=N)``."""

from typing import Any, List, Sequence, Tuple

import torch

from ..registry import RUNNERS
from ..utils.errors import AssertedValueError
from .base_runner import BaseRunner
from .data_pass import begin_pass
from .run_checkpoints import drains_stage_end


@RUNNERS.register_module()
class EpochBasedRunner(BaseRunner):
    """Run whole epochs of each workflow phase until ``max_epochs``.

    ``workflow=[('train', 1)]`` trains; ``[('train', 2), ('val', 1)]`` adds a
    val phase (eval mode, no grad, losses logged) every two epochs.
    """

    default_ckpt_tmpl = 'epoch_{}.pth'

    def run(self, data_loaders: Sequence[Any], workflow: List[Tuple[str, int]],
            max_epochs: int = None) -> None:
        with self._starting_run():  # (a failure here puts Ctrl-C's handlers back too)
            if max_epochs is not None:
                self._max_epochs = max_epochs
            if self._max_epochs is None:
                # mmcv asserts max_epochs: catchable as ValueError and AssertionError
                raise AssertedValueError('EpochBasedRunner needs max_epochs '
                                         '(runner=dict(max_epochs=N))')
            _check_workflow(workflow, data_loaders, self)
            for (mode, _), loader in zip(workflow, data_loaders):
                if mode == 'train':
                    self._max_iters = self._max_epochs * len(loader)
                    break
            self.logger.info(f'Start running, work_dir: {self.work_dir}, workflow: {workflow}, '
                             f'max: {self._max_epochs} epochs')
            self.call_hook('before_run')
        try:
            while self._epoch < self._max_epochs and not self.should_stop:
                for (mode, epochs), loader in zip(workflow, data_loaders):
                    for _ in range(epochs):
                        if mode == 'train' and (self._epoch >= self._max_epochs
                                                or self.should_stop):
                            break
                        getattr(self, mode)(loader)
            self._save_if_preempted()
        finally:
            self._end_run()

    @drains_stage_end  # (see at_stage_end)
    def train(self, data_loader: Any) -> None:
        self.model_wrapper.train()
        self.mode = 'train'
        self.data_loader = data_loader
        self.call_hook('before_train_epoch')
        self._samples_per_gpu = getattr(data_loader, 'batch_size', None)
        batches, self._data_pass, notes = begin_pass(  # see runner/data_pass.py
            data_loader, self._epoch, self._start_inner_iter, self._resume_geometry,
            getattr(self, '_resume_data', None))
        start, self._start_inner_iter, self._resume_data = self._data_pass.index, 0, None
        for level, note in notes:
            self.logger.log(level, note)
        for i, batch in enumerate(batches, start):
            self._inner_iter = i
            self.data_batch = batch
            self.call_hook('before_train_iter')
            self.run_iter(batch, train_mode=True)
            self._resume_point = (self._epoch, i + 1, self._iter + 1)
            self.call_hook('after_train_iter')
            if self._stage_end:  # what a hook deferred to the end of the stage (checkpoints)
                self._end_stage()
            if self._polls_signals:  # DDP: the ranks agree now and then (runner/preemption.py)
                self._poll_stop_signal()
            self._iter += 1
            self.data_batch = None
            if self.should_stop and i + 1 < len(data_loader):
                return  # stopped mid-epoch (preemption): no epoch-end hooks
        self._resume_point = (self._epoch + 1, 0, self._iter)
        self.call_hook('after_train_epoch')
        self._end_stage()
        self._epoch += 1

    @torch.no_grad()
    def val(self, data_loader: Any) -> None:
        self.model_wrapper.eval()
        self.mode = 'val'
        self.data_loader = data_loader
        self.call_hook('before_val_epoch')
        for i, batch in enumerate(data_loader):
            self._inner_iter = i
            self.data_batch = batch
            self.call_hook('before_val_iter')
            self.run_iter(batch, train_mode=False)
            self.call_hook('after_val_iter')
            self.data_batch = None
        self.call_hook('after_val_epoch')


def check_workflow(workflow) -> None:
    """Raise ``ValueError`` unless ``workflow`` is a list of ``('train'|'val', N > 0)`` phases.

    Also an ``AssertionError``, as mmcv asserted a list of tuples. The builder
    turns the error into a ``ConfigError`` naming ``workflow``.
    """
    for phase in workflow:
        if len(phase) != 2 or phase[0] not in ('train', 'val') or not isinstance(phase[1], int) \
                or isinstance(phase[1], bool) or phase[1] <= 0:
            name = f"'{phase[0]}'" if phase and isinstance(phase[0], str) else repr(phase)
            raise AssertedValueError(f"workflow phase {name} is not ('train', N) or ('val', N) "
                                     f'with N > 0: got {tuple(phase)!r}')


def _check_workflow(workflow, data_loaders, runner) -> None:
    check_workflow(workflow)
    if len(workflow) != len(data_loaders):
        raise AssertedValueError(f'workflow {workflow} has {len(workflow)} phases but '
                                 f'{len(data_loaders)} data loaders were given')
