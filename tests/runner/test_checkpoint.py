"""Checkpoint files and runner state: round trips, latest.pth, safe loading, exact resume."""

import os
import os.path as osp
import pickle

import pytest
import torch

from mtrain.hooks import CheckpointHook, OptimizerHook
from mtrain.runner import (CheckpointError, find_latest_valid, load_checkpoint_file,
                           save_checkpoint_file)


def _train(runner, loader, ckpt_hook=None):
    runner.register_hook(OptimizerHook())
    if ckpt_hook is not None:
        runner.register_hook(ckpt_hook)
    runner.run([loader], [('train', 1)])
    return runner


def _weights(runner):
    return {k: v.clone() for k, v in runner.model_wrapper.module.state_dict().items()}


def test_epoch_checkpoints_latest_link_and_max_keep(make_runner, toy_loader, tmp_path):
    runner = _train(make_runner(max_len=4), toy_loader, CheckpointHook(interval=1, max_keep_ckpts=2))
    names = sorted(n for n in os.listdir(tmp_path) if n.endswith('.pth'))
    assert names == ['epoch_3.pth', 'epoch_4.pth', 'latest.pth']
    assert os.readlink(tmp_path / 'latest.pth') == 'epoch_4.pth'
    ckpt = load_checkpoint_file(str(tmp_path / 'latest.pth'))
    assert ckpt['meta']['epoch'] == 4 and ckpt['meta']['iter'] == 32
    assert set(ckpt) >= {'meta', 'state_dict', 'optimizer', 'progress', 'rng'}
    for k, v in _weights(runner).items():
        assert torch.equal(ckpt['state_dict'][k], v)


def test_iteration_checkpoints_under_epoch_runner(make_runner, toy_loader, tmp_path):
    _train(make_runner(max_len=2), toy_loader, CheckpointHook(interval=5, by_epoch=False))
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith('iter_')) == \
        ['iter_10.pth', 'iter_15.pth', 'iter_16.pth', 'iter_5.pth']
    progress = load_checkpoint_file(str(tmp_path / 'iter_5.pth'))['progress']
    assert progress == dict(epoch=0, inner_iter=5, iter=5, num_updates=5, world_size=1,
                            samples_per_gpu=8, phase=[0, 0], workflow=[['train', 1]])


def test_checkpoint_is_readable_by_mmengine(make_runner, toy_loader, tmp_path, toy_model):
    from mmengine.runner import load_checkpoint
    runner = _train(make_runner(max_len=1), toy_loader, CheckpointHook(interval=1))
    load_checkpoint(toy_model, str(tmp_path / 'epoch_1.pth'), map_location='cpu')
    for k, v in toy_model.state_dict().items():
        assert torch.equal(v, runner.model_wrapper.module.state_dict()[k])


@pytest.mark.parametrize('by_epoch,interval', [(True, 1), (False, 5), (False, 8)])
def test_resume_is_bitwise_identical_to_an_uninterrupted_run(make_runner, toy_loader, tmp_path,
                                                             by_epoch, interval):
    full = _train(make_runner(max_len=3, momentum=0.9), toy_loader)
    first = make_runner(max_len=3, momentum=0.9)
    first.register_hook(OptimizerHook())
    first.register_hook(CheckpointHook(interval=interval, by_epoch=by_epoch))
    first.run([toy_loader], [('train', 1)], max_epochs=1)
    name = 'epoch_1.pth' if by_epoch else f'iter_{interval}.pth'
    resumed = make_runner(max_len=3, momentum=0.9)
    resumed.register_hook(OptimizerHook())
    resumed.resume(str(tmp_path / name))
    resumed.run([toy_loader], [('train', 1)])
    assert resumed.iter == full.iter == 24 and resumed.num_updates == 24
    for k, v in _weights(full).items():
        assert torch.equal(v, _weights(resumed)[k]), k


def test_atomic_write_leaves_no_temp_file_and_replaces_whole(tmp_path):
    path = str(tmp_path / 'a.pth')
    save_checkpoint_file({'x': torch.ones(3)}, path)
    save_checkpoint_file({'x': torch.zeros(3)}, path)
    assert os.listdir(tmp_path) == ['a.pth']
    assert torch.equal(load_checkpoint_file(path)['x'], torch.zeros(3))


def test_failed_write_keeps_the_old_file(tmp_path):
    path = str(tmp_path / 'a.pth')
    save_checkpoint_file({'x': torch.ones(3)}, path)

    class Unpicklable:
        def __reduce__(self):
            raise RuntimeError('disk full (simulated by a failing pickle)')

    with pytest.raises(RuntimeError, match='disk full'):
        save_checkpoint_file({'x': Unpicklable()}, path)
    assert os.listdir(tmp_path) == ['a.pth']
    assert torch.equal(load_checkpoint_file(path)['x'], torch.ones(3))


def test_truncated_checkpoint_is_reported_by_name_and_skipped(tmp_path):
    good, bad = str(tmp_path / 'epoch_1.pth'), str(tmp_path / 'epoch_2.pth')
    save_checkpoint_file({'state_dict': {'w': torch.ones(100)}}, good)
    save_checkpoint_file({'state_dict': {'w': torch.ones(100)}}, bad)
    with open(bad, 'r+b') as f:
        f.truncate(os.path.getsize(bad) // 2)
    os.utime(bad, (os.path.getmtime(good) + 10, ) * 2)
    with pytest.raises(CheckpointError, match='epoch_2.pth is truncated or corrupt'):
        load_checkpoint_file(bad)
    assert find_latest_valid(str(tmp_path)) == good


def test_malicious_pickle_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / 'pwned'

    class Exploit:
        def __reduce__(self):
            return (open, (str(marker), 'w'))

    path = str(tmp_path / 'evil.pth')
    with open(path, 'wb') as f:
        torch.save({'state_dict': {}, 'payload': Exploit()}, f, pickle_protocol=2)
    assert not marker.exists()
    with pytest.raises(CheckpointError, match='--trust-checkpoint'):
        load_checkpoint_file(path)
    assert not marker.exists()


def test_missing_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(CheckpointError, match='does not exist'):
        load_checkpoint_file(str(tmp_path / 'nope.pth'))
