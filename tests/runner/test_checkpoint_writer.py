"""Checkpoints written in the background (``async_save``): same files, snapshot semantics, errors."""

import errno
import os
import threading

import pytest
import torch

from mtrain.hooks import CheckpointHook, Hook, OptimizerHook
from mtrain.runner import CheckpointError, load_checkpoint_file
from mtrain.runner import run_checkpoints


def _run(make_runner, loader, **ckpt_kwargs):
    runner = make_runner(max_len=3, momentum=0.9)
    runner.register_hook(OptimizerHook())
    runner.register_hook(CheckpointHook(**ckpt_kwargs))
    runner.run([loader], [('train', 1)])
    return runner


def _assert_same(a, b):
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            _assert_same(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same(x, y)
    else:
        assert a == b


def test_async_checkpoints_equal_the_synchronous_ones(make_runner, toy_loader, tmp_path):
    kwargs = dict(interval=5, by_epoch=False, max_keep_ckpts=2)
    _run(make_runner, toy_loader, out_dir=str(tmp_path / 'sync'), **kwargs)
    _run(make_runner, toy_loader, out_dir=str(tmp_path / 'async'), async_save=True, **kwargs)
    sync_dir, async_dir = (tmp_path / d / tmp_path.name for d in ('sync', 'async'))  # as mmcv
    files = sorted(os.listdir(sync_dir))
    assert files == sorted(os.listdir(async_dir)) == \
        ['iter_15.pth', 'iter_20.pth', 'iter_24.pth', 'latest.pth']
    assert os.readlink(async_dir / 'latest.pth') == 'iter_24.pth'
    for name in files:
        sync = load_checkpoint_file(str(sync_dir / name))
        written = load_checkpoint_file(str(async_dir / name))
        for key in ('state_dict', 'optimizer', 'progress', 'hooks', 'log_buffer', 'rng'):
            _assert_same(sync[key], written[key])


@pytest.fixture
def slow_writes(monkeypatch):
    """Checkpoint files are written only once the returned event is set."""
    release, real_save = threading.Event(), run_checkpoints.save_checkpoint_file

    def save_when_released(ckpt, path):
        assert release.wait(timeout=30)
        real_save(ckpt, path)

    monkeypatch.setattr(run_checkpoints, 'save_checkpoint_file', save_when_released)
    return release


def test_the_snapshot_is_taken_when_saving_not_when_writing(make_runner, toy_loader, tmp_path,
                                                            slow_writes):
    runner = make_runner(max_len=1, momentum=0.9)
    runner.register_hook(OptimizerHook())
    runner.run([toy_loader], [('train', 1)])
    before = {k: v.clone() for k, v in runner.model_wrapper.module.state_dict().items()}
    momentum = [s['momentum_buffer'].clone() for s in runner.optimizer.state.values()]
    path = runner.save_checkpoint(str(tmp_path), 'snap.pth', background=True)
    with torch.no_grad():  # training goes on while the file is written
        for p in runner.model_wrapper.module.parameters():
            p.add_(1.0)
        for state in runner.optimizer.state.values():
            state['momentum_buffer'].mul_(3.0)
    runner.meta.setdefault('hook_msgs', {})['added'] = 'later'
    slow_writes.set()
    runner.wait_for_checkpoint()
    ckpt = load_checkpoint_file(path)
    _assert_same(ckpt['state_dict'], before)
    _assert_same([s['momentum_buffer'] for s in ckpt['optimizer']['state'].values()], momentum)
    assert 'added' not in ckpt['meta'].get('hook_msgs', {})


def test_a_save_waits_for_the_write_in_flight_so_latest_moves_forward(make_runner, tmp_path,
                                                                     slow_writes):
    runner = make_runner()
    first = runner.save_checkpoint(str(tmp_path), 'first.pth', background=True)
    threading.Timer(0.3, slow_writes.set).start()
    second = runner.save_checkpoint(str(tmp_path), 'second.pth')  # e.g. a preemption save
    assert os.path.isfile(first) and os.path.isfile(second)
    assert os.readlink(tmp_path / 'latest.pth') == 'second.pth'


def test_a_failed_background_write_is_raised_and_keeps_the_previous_checkpoint(
        make_runner, toy_loader, tmp_path, monkeypatch):
    real_save, calls = run_checkpoints.save_checkpoint_file, []

    def disk_fills_up(ckpt, path):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, 'No space left on device', path)
        real_save(ckpt, path)

    class AfterRun(Hook):
        called = False

        def after_run(self, runner):
            AfterRun.called = True

    monkeypatch.setattr(run_checkpoints, 'save_checkpoint_file', disk_fills_up)
    runner = make_runner(max_len=3)
    runner.register_hook(OptimizerHook())
    runner.register_hook(CheckpointHook(interval=1, async_save=True))
    runner.register_hook(AfterRun())
    with pytest.raises(CheckpointError, match=r'epoch_2\.pth in the background failed '
                                              r'\(OSError: .*No space left'):
        runner.run([toy_loader], [('train', 1)])
    assert runner.epoch == 2  # raised when the epoch-3 checkpoint waited for it
    assert AfterRun.called
    assert os.readlink(tmp_path / 'latest.pth') == 'epoch_1.pth'
    assert load_checkpoint_file(str(tmp_path / 'latest.pth'))['meta']['epoch'] == 1
