"""The iteration loop: ``runner=dict(type='IterBasedRunner', max_iters=N)``."""

from typing import Any, List, Sequence, Tuple

import torch
from torch import nn

from ..registry import RUNNERS
from .base_runner import BaseRunner
from .epoch_based_runner import _check_workflow
from .iter_loader import IterLoader
from .run_checkpoints import drains_stage_end


@RUNNERS.register_module()
class IterBasedRunner(BaseRunner):
    """Run ``max_iters`` iterations, cycling the loaders endlessly.

    ``runner.epoch`` is the number of completed passes over the train loader.
    As in mmcv 1.x, ``before_epoch``/``after_epoch`` are called once around
    the whole run and the ``*_train_epoch`` points are not called.
    ``register_training_hooks`` defaults ``by_epoch=False`` on checkpoints,
    loggers and lr/momentum schedules (as mmcv 1.x; the table is
    :mod:`mtrain.defaults`); a schedule given
    ``by_epoch=True`` follows ``runner.epoch``, the passes over the loader.
    A resumed run continues at the checkpoint's place in the workflow, with
    each loader at its next batch (:mod:`.workflow_position`); a stop
    (``should_stop``) ends the run before the next iteration of any phase.
    """

    default_ckpt_tmpl = 'iter_{}.pth'

    def run(self, data_loaders: Sequence[Any], workflow: List[Tuple[str, int]],
            max_iters: int = None) -> None:
        with self._starting_run():  # (a failure here puts Ctrl-C's handlers back too)
            if max_iters is not None:
                self._max_iters = max_iters
            if self._max_iters is None:
                raise ValueError('IterBasedRunner needs max_iters (runner=dict(max_iters=N))')
            _check_workflow(workflow, data_loaders, self)
            self.logger.info(f'Start running, work_dir: {self.work_dir}, workflow: {workflow}, '
                             f'max: {self._max_iters} iters')
            self.call_hook('before_run')
        resumed = (self._epoch, self._start_inner_iter, self._resume_geometry,
                   getattr(self, '_resume_data', None))
        loaders = [IterLoader(loader, *(resumed if mode == 'train' else self._resumed_pass(i)),
                              role=mode)
                   for i, ((mode, _), loader) in enumerate(zip(workflow, data_loaders))]
        self._start_inner_iter, self._resume_data = 0, None
        try:
            self.call_hook('before_epoch')
            phase, first = self._start_workflow(workflow)
            # A resumed run first ends the cycle it was in (the val iteration after the
            # checkpoint's train iteration), then runs whole cycles. (Inline: a cycle is
            # often one iteration.)
            while phase or first or (self._iter < self._max_iters and not self.should_stop):
                for index in range(phase, len(workflow)):
                    mode, iters = workflow[index]
                    self._inner_iter = first
                    for done in range(first, iters):
                        if self.should_stop or (mode == 'train' and self._iter >= self._max_iters):
                            break
                        self._phase = (index, done + 1)  # where this iteration's checkpoint resumes
                        getattr(self, mode)(loaders[index])
                    first = 0
                phase = 0
            self._save_if_preempted()
            self.call_hook('after_epoch')
        finally:
            for loader in loaders:
                loader.close()
            self._end_run()

    @drains_stage_end  # (see at_stage_end)
    def train(self, data_loader: IterLoader) -> None:
        ensure_training(self.model_wrapper)  # every iteration, as mmcv (a hook may call eval())
        self.mode = 'train'
        self.data_loader = data_loader
        self._epoch = data_loader.epoch  # read before the batch, as mmcv (a new pass shows next)
        batch = next(data_loader)
        if data_loader.resume_notes:
            self._log_notes(data_loader.resume_notes)
        self._data_pass = data_loader.data_pass
        self._samples_per_gpu = data_loader.batch_size
        self.data_batch = batch
        self.call_hook('before_train_iter')
        self.run_iter(batch, train_mode=True)
        self._resume_point = (data_loader.epoch, data_loader.consumed, self._iter + 1)
        self.call_hook('after_train_iter')
        if self._stage_end:  # what a hook deferred to the end of the stage (checkpoints)
            self._end_stage()
        if self._polls_signals:  # DDP: the ranks agree now and then (runner/preemption.py)
            self._poll_stop_signal()
        self.data_batch = None
        self._inner_iter += 1
        self._iter += 1

    @torch.no_grad()
    def val(self, data_loader: IterLoader) -> None:
        self.model_wrapper.eval()
        self.mode = 'val'
        self.data_loader = data_loader
        batch = next(data_loader)
        if data_loader.resume_notes:
            self._log_notes(data_loader.resume_notes)
        self._phase_passes[self._phase[0]] = (data_loader.data_pass, data_loader.consumed)
        self.data_batch = batch
        self.call_hook('before_val_iter')
        self.run_iter(batch, train_mode=False)
        self.call_hook('after_val_iter')
        self.data_batch = None
        self._inner_iter += 1


_MODULE_TRAIN = nn.Module.train


def ensure_training(model: nn.Module) -> None:
    """``model.train()``, unless it would change nothing, judged from the modules as they are now.

    ``nn.Module.train()`` sets ``training`` on the module and every module
    below it. When each of them already trains and none has a ``train`` of
    its own (mmdet backbones do: ``norm_eval``, frozen stages), the call
    would change nothing, and the walk that checks costs a tenth of it (1
    against 13 µs for a 3-layer MLP, 3 % of its whole step on a CPU).
    Nothing is kept between calls: a hook that put the model or any part of
    it in eval mode, a module added mid-run or a ``train`` patched on a class
    or an instance is seen at the next iteration.
    """
    modules, plain_train = [model], _MODULE_TRAIN
    for module in modules:  # (a list grown while it is read: no pop/extend per module)
        if module is None:  # (register_module(name, None) leaves a hole)
            continue
        attrs = module.__dict__  # (read once: the flag, an instance's train, the children)
        if (not attrs.get('training') or 'train' in attrs
                or type(module).train is not plain_train):  # (a train() of its own: always called)
            model.train()
            return
        children = attrs.get('_modules')
        if children:  # (a leaf has none: no call)
            modules += children.values()
