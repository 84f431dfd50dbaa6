"""Checkpoints written in the background (``async_save``): same files, snapshot semantics, errors."""

import errno
import os
import threading

import pytest
import torch

from mtrain.hooks import CheckpointHook, Hook, OptimizerHook
from mtrain.runner import CheckpointError, load_checkpoint_file
from mtrain.runner import run_checkpoints
from mtrain.runner.checkpoint_writer import CheckpointWriter


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


def test_a_job_queued_with_then_runs_after_the_one_in_flight_and_not_after_a_failure():
    writer, order, release = CheckpointWriter(), [], threading.Event()
    writer.submit('a', lambda: (release.wait(), order.append('shards')))
    writer.then('a', lambda: order.append('rank 0 file'))  # queued behind the shards
    assert order == []
    release.set()
    writer.wait()
    assert order == ['shards', 'rank 0 file']
    writer.then('b', lambda: order.append('alone'))  # nothing in flight: runs now
    writer.wait()

    def fail():
        release.wait()
        raise OSError(errno.ENOSPC, 'No space left on device')

    release.clear()
    writer.submit('c', fail)
    writer.then('c', lambda: order.append('never'))
    release.set()
    with pytest.raises(CheckpointError, match='writing checkpoint c in the background failed'):
        writer.wait()
    assert order == ['shards', 'rank 0 file', 'alone']


def test_one_process_sharded_checkpoints_in_the_background_equal_the_files(
        make_runner, toy_loader, tmp_path):
    kwargs = dict(interval=5, by_epoch=False, max_keep_ckpts=2)
    _run(make_runner, toy_loader, out_dir=str(tmp_path / 'file'), **kwargs)
    _run(make_runner, toy_loader, out_dir=str(tmp_path / 'sharded'), sharded=True,
         async_save=True, **kwargs)
    file_dir, sharded_dir = (tmp_path / way / tmp_path.name for way in ('file', 'sharded'))
    assert sorted(os.listdir(sharded_dir)) == sorted(os.listdir(file_dir)) == [
        'iter_15.pth', 'iter_20.pth', 'iter_24.pth', 'latest.pth']  # (max_keep_ckpts counts by 5)
    assert os.path.isdir(sharded_dir / 'iter_24.pth')
    assert not [n for n in os.listdir(tmp_path) if n.startswith('.sharded-tmp-')]
    file = load_checkpoint_file(str(file_dir / 'latest.pth'))
    sharded = load_checkpoint_file(str(sharded_dir / 'latest.pth'))
    for key in ('state_dict', 'progress', 'hooks', 'log_buffer', 'rng'):
        _assert_same(sharded[key], file[key])
    # the optimizer state keyed by parameter name, as DCP keeps it: the same tensors
    names = list(sharded['optimizer']['state'])
    assert names == list(file['state_dict'])  # (the toy model's parameters, no buffers)
    for name, state in zip(names, file['optimizer']['state'].values()):
        _assert_same(sharded['optimizer']['state'][name]['momentum_buffer'],
                     state['momentum_buffer'])
