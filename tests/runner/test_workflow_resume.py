"""Exact resume of a workflow with a ``('val', N)`` phase (issue 33, item 1).

Both loaders are built as a 1.x codebase's ``build_dataloader`` builds them: no
``generator``, so every pass draws its workers' base seed from the global torch RNG when
its iterator is created (torch does with ``num_workers=0`` too), and the train loader's
``shuffle=True`` draws its order from it. Each test trains a reference run, a run stopped
where a checkpoint is written and a run resumed from that checkpoint, and compares every
loss after the checkpoint (train and val) and the final weights bitwise.
"""

import logging

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader

from mtrain.hooks import Hook
from mtrain.parallel import MMDataParallel
from mtrain.runner import EpochBasedRunner, IterBasedRunner
from test_user_loader_resume import Indexed, StopAt, Stream

BATCH = 16  # 4 batches a pass over the 64 samples of Indexed


class Recorder(nn.Module):
    """mmcv's model contract; dropout in training; records every train and val loss."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 1)
        self.losses = {'train': [], 'val': []}

    def forward(self, x):
        return self.fc(x)

    def _step(self, data, mode):
        x = nn.functional.dropout(data['x'], 0.5, self.training)
        loss = (self.fc(x) ** 2).mean() + data['idx'].float().mean() / 1000
        self.losses[mode].append(loss.item())
        return dict(loss=loss, log_vars={'loss': loss.detach()}, num_samples=len(data['idx']))

    def train_step(self, data, optimizer):
        return self._step(data, 'train')

    def val_step(self, data, optimizer=None):
        return self._step(data, 'val')


def _run(work_dir, by_epoch, length, workflow, resume=None, stop_at=None, interval=100,
         hook=None, loaders=None):
    """One run through the Python API with user-built loaders; returns the model."""
    torch.manual_seed(1)
    model = Recorder()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    cls, key = (EpochBasedRunner, 'max_epochs') if by_epoch else (IterBasedRunner, 'max_iters')
    runner = cls(MMDataParallel(model), optimizer=optimizer, work_dir=str(work_dir),
                 logger=logging.getLogger('mtrain.test'), **{key: length})
    checkpoints = dict(interval=1) if by_epoch else dict(interval=interval, by_epoch=False)
    runner.register_training_hooks(lr_config=None, optimizer_config=dict(grad_clip=None),
                                   checkpoint_config=checkpoints, log_config=None)
    if stop_at is not None:
        runner.register_hook(StopAt(stop_at), 'LOWEST')
    if hook is not None:
        runner.register_hook(hook)
    if resume is not None:
        runner.resume(str(resume))
    loaders = loaders or [DataLoader(Indexed(), batch_size=BATCH, shuffle=True),
                          DataLoader(Indexed(), batch_size=BATCH)]
    runner.run(loaders, workflow)
    return model


def _assert_resumed_as_uninterrupted(reference, resumed, train_done, val_done):
    assert resumed.losses['train'] == reference.losses['train'][train_done:]
    assert resumed.losses['val'] == reference.losses['val'][val_done:]
    assert torch.equal(resumed.fc.weight, reference.fc.weight)
    assert torch.equal(resumed.fc.bias, reference.fc.bias)


def test_epoch_runner_with_a_val_phase_resumes_bitwise_from_epoch_1(tmp_path):
    # The repro: epoch_1.pth is written at the end of the first train epoch, before
    # the val pass that the uninterrupted run then takes (and that draws a base seed).
    workflow = [('train', 1), ('val', 1)]
    reference = _run(tmp_path / 'ref', True, 3, workflow)
    _run(tmp_path / 'run', True, 3, workflow, stop_at=4)
    resumed = _run(tmp_path / 'res', True, 3, workflow, resume=tmp_path / 'run' / 'epoch_1.pth')
    assert len(reference.losses['val']) == 3 * 4
    _assert_resumed_as_uninterrupted(reference, resumed, 4, 0)


def test_epoch_runner_resumes_inside_a_phase_of_several_epochs(tmp_path):
    # [('train', 2), ('val', 1)] resumed from epoch_1.pth: one more train epoch, then val
    # (mmcv's loop would train two epochs before the val pass).
    workflow = [('train', 2), ('val', 1)]
    reference = _run(tmp_path / 'ref', True, 4, workflow)
    _run(tmp_path / 'run', True, 4, workflow, stop_at=4)
    resumed = _run(tmp_path / 'res', True, 4, workflow, resume=tmp_path / 'run' / 'epoch_1.pth')
    _assert_resumed_as_uninterrupted(reference, resumed, 4, 0)


@pytest.mark.parametrize('stop_at', [6, 9], ids=['mid-val-pass', 'val-pass-starts-next'])
def test_iter_runner_with_a_val_phase_resumes_bitwise(tmp_path, stop_at):
    # One val iteration after each train iteration; the checkpoint of train iteration n comes
    # before val iteration n, which the resumed run takes first. At 6 the val loader is inside
    # its second pass (5 of 4 + 4 batches taken); at 9 its third pass starts right after the
    # checkpoint, drawing its base seed there.
    workflow = [('train', 1), ('val', 1)]
    reference = _run(tmp_path / 'ref', False, 14, workflow, interval=stop_at)
    _run(tmp_path / 'run', False, 14, workflow, stop_at=stop_at, interval=stop_at)
    resumed = _run(tmp_path / 'res', False, 14, workflow, interval=stop_at,
                   resume=tmp_path / 'run' / f'iter_{stop_at}.pth')
    _assert_resumed_as_uninterrupted(reference, resumed, stop_at, stop_at - 1)


class SaveInVal(Hook):
    """Writes ``val.pth`` after val iteration ``n`` of the first val pass (a user's hook)."""

    def __init__(self, n: int) -> None:
        self.n, self.saved = n, False

    def after_val_iter(self, runner) -> None:
        if not self.saved and runner.inner_iter + 1 == self.n:
            runner.gather_checkpoint_state()
            runner.save_checkpoint(runner.work_dir, filename_tmpl='val.pth')
            self.saved = True


def test_epoch_runner_resumes_inside_a_val_pass(tmp_path):
    # A checkpoint written after 2 of the 4 val batches: the resumed run takes the other 2
    # (from the pass as it was ordered), then trains on.
    workflow = [('train', 1), ('val', 1)]
    reference = _run(tmp_path / 'ref', True, 3, workflow)
    _run(tmp_path / 'run', True, 1, workflow, hook=SaveInVal(2))
    resumed = _run(tmp_path / 'res', True, 3, workflow, resume=tmp_path / 'run' / 'val.pth')
    _assert_resumed_as_uninterrupted(reference, resumed, 4, 2)


def test_iter_runner_val_loader_resume_note_names_the_val_loader(tmp_path, caplog):
    # A val loader over an IterableDataset resumed inside its pass: the one-line note says
    # which loader (it used to say "the train loader" for every loader).
    workflow = [('train', 1), ('val', 1)]

    def loaders():
        return [DataLoader(Indexed(), batch_size=BATCH, shuffle=True),
                DataLoader(Stream(), batch_size=BATCH)]

    _run(tmp_path / 'run', False, 6, workflow, interval=6, loaders=loaders())
    with caplog.at_level(logging.WARNING, 'mtrain.test'):
        _run(tmp_path / 'res', False, 8, workflow, interval=6, loaders=loaders(),
             resume=tmp_path / 'run' / 'iter_6.pth')
    lines = [r.getMessage() for r in caplog.records if 'IterableDataset' in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith('the val loader (Stream')


@pytest.mark.parametrize('by_epoch', [True, False], ids=['EpochBasedRunner', 'IterBasedRunner'])
def test_a_stop_ends_the_run_before_the_next_phase(tmp_path, by_epoch):
    # A stop after a train epoch (iteration) used to run the val phase first: the stopped run
    # then drew past its own checkpoint. Now it stops where its checkpoint was written.
    model = _run(tmp_path / 'run', by_epoch, 3 if by_epoch else 12, [('train', 1), ('val', 1)],
                 stop_at=4, interval=4)
    assert (len(model.losses['train']), len(model.losses['val'])) == (4, 3 * (not by_epoch))
