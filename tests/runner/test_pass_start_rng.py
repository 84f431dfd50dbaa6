"""The RNG state noted at a pass start: which libraries, as they give it, made plain for checkpoints."""

import random

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, RandomSampler

from mtrain.hooks import CheckpointHook, OptimizerHook
from mtrain.runner.data_pass import pass_start
from mtrain.runner.rng import capture_rng_state, plain_rng_state, set_rng_state
from test_user_loader_resume import NumpyGroupSampler  # (a sampler shuffling with numpy)


def mid_pass_rng(make_runner, loader, tmp_path):
    """The RNG state a checkpoint at iteration 12 (mid-pass: 8 batches a pass) noted for its pass."""
    runner = make_runner(by_epoch=False, max_len=12)
    runner.register_hook(OptimizerHook())
    runner.register_hook(CheckpointHook(interval=12, by_epoch=False))
    runner.run([loader], [('train', 1)])
    ckpt = torch.load(tmp_path / 'iter_12.pth', weights_only=True)  # no numpy array in it
    return ckpt['data']['pass_start']['rng']


def test_a_pass_over_a_user_sampler_notes_every_rng_as_plain_data(make_runner, toy_dataset,
                                                                  tmp_path):
    loader = DataLoader(toy_dataset, batch_size=8, sampler=NumpyGroupSampler(len(toy_dataset)))
    rng = mid_pass_rng(make_runner, loader, tmp_path)
    assert isinstance(rng['python'], list) and isinstance(rng['numpy'][1], list)
    assert len(rng['numpy'][1]) == 624
    assert isinstance(rng['torch'], torch.Tensor)


@pytest.mark.parametrize('kind', ['mtrain', 'shuffle', 'sequential'])
def test_a_pass_over_torch_or_mtrain_samplers_notes_torch_alone(make_runner, toy_dataset, toy_loader,
                                                               tmp_path, kind):
    loader = {'mtrain': toy_loader,
              'shuffle': DataLoader(toy_dataset, batch_size=8, shuffle=True),
              'sequential': DataLoader(toy_dataset, batch_size=8)}[kind]
    assert sorted(mid_pass_rng(make_runner, loader, tmp_path)) == ['torch']


def test_the_parts_are_asked_at_every_pass(toy_dataset):
    """A sampler replaced between passes (or a subclass of torch's) counts at the next pass."""
    loader = DataLoader(toy_dataset, batch_size=8, shuffle=True)
    assert sorted(pass_start(loader)['rng']) == ['torch']
    loader.batch_sampler.sampler = NumpyGroupSampler(len(toy_dataset))
    assert sorted(pass_start(loader)['rng']) == ['numpy', 'python', 'torch']

    class MyRandomSampler(RandomSampler):
        pass

    loader = DataLoader(toy_dataset, batch_size=8, sampler=MyRandomSampler(toy_dataset))
    assert sorted(pass_start(loader)['rng']) == ['numpy', 'python', 'torch']


def test_a_torch_only_note_restores_torch_and_leaves_the_others():
    state = plain_rng_state({'torch': torch.get_rng_state()})
    expected = torch.rand(1).item()
    random.seed(3)
    np.random.seed(3)
    others = (random.random(), np.random.rand())
    random.seed(3)
    np.random.seed(3)
    set_rng_state(state)
    assert torch.rand(1).item() == expected
    assert (random.random(), np.random.rand()) == others


def test_captured_and_plain_states_restore_the_same_streams():
    state = capture_rng_state()
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    for restored in (state, plain_rng_state(state), plain_rng_state(plain_rng_state(state))):
        set_rng_state(restored)
        assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected
