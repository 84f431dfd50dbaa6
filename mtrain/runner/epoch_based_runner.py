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
    val phase (eval mode, no grad, losses logged) every two epochs. A resumed
    run continues at the checkpoint's place in the workflow (after
    ``epoch_1.pth``: the val pass that followed it), see
    :mod:`.workflow_position`; a stop (``should_stop``) ends the run before the
    next pass of any phase.
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
            start = self._start_workflow(workflow)
            # A resumed run first ends the cycle it was in (even past max_epochs: the val pass
            # after the last train epoch), then runs whole cycles.
            while start != (0, 0) or (self._epoch < self._max_epochs and not self.should_stop):
                self._run_cycle(workflow, data_loaders, start)
                start = (0, 0)
            self._save_if_preempted()
        finally:
            self._end_run()

    def _run_cycle(self, workflow, data_loaders, start) -> None:
        """One pass through the workflow from ``start`` (phase index, its epochs done)."""
        for index in range(start[0], len(workflow)):
            mode, epochs = workflow[index]
            for done in range(start[1] if index == start[0] else 0, epochs):
                if self.should_stop or (mode == 'train' and self._epoch >= self._max_epochs):
                    break
                self._phase = (index, done)  # a checkpoint from here on resumes in this pass
                getattr(self, mode)(data_loaders[index])

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
        self._log_notes(notes)
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
        self._phase = (self._phase[0], self._phase[1] + 1)  # (the epoch-end checkpoint: next)
        self.call_hook('after_train_epoch')
        self._end_stage()
        self._epoch += 1

    @torch.no_grad()
    def val(self, data_loader: Any) -> None:
        self.model_wrapper.eval()
        self.mode = 'val'
        self.data_loader = data_loader
        self.call_hook('before_val_epoch')
        index = self._phase[0]
        epoch, start, saved, data = self._resumed_pass(index)  # (mid-pass checkpoint: rare)
        batches, data_pass, notes = begin_pass(data_loader, epoch if data else self._epoch,
                                               start, saved, data, role='val')
        self._log_notes(notes)
        for i, batch in enumerate(batches, data_pass.index):
            self._inner_iter = i
            self.data_batch = batch
            self.call_hook('before_val_iter')
            self.run_iter(batch, train_mode=False)
            self._phase_passes[index] = (data_pass, i + 1)
            self.call_hook('after_val_iter')
            self.data_batch = None
        self._phase_passes.pop(index, None)  # a whole pass: nothing of it to resume
        self._phase = (index, self._phase[1] + 1)
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
