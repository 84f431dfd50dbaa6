"""The RNG state noted at a pass start: as the libraries give it, made plain for checkpoints."""

import random

import numpy as np
import torch

from mtrain.hooks import CheckpointHook, OptimizerHook
from mtrain.runner.rng import capture_rng_state, plain_rng_state, set_rng_state


def test_a_mid_pass_checkpoint_holds_the_pass_start_as_plain_data(make_runner, toy_loader,
                                                                 tmp_path):
    runner = make_runner(by_epoch=False, max_len=12)  # 8 batches a pass: iteration 12 is mid-pass
    runner.register_hook(OptimizerHook())
    runner.register_hook(CheckpointHook(interval=12, by_epoch=False))
    runner.run([toy_loader], [('train', 1)])
    ckpt = torch.load(tmp_path / 'iter_12.pth', weights_only=True)  # no numpy array in it
    rng = ckpt['data']['pass_start']['rng']
    assert isinstance(rng['python'], list) and isinstance(rng['numpy'][1], list)
    assert len(rng['numpy'][1]) == 624


def test_captured_and_plain_states_restore_the_same_streams():
    state = capture_rng_state()
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    for restored in (state, plain_rng_state(state), plain_rng_state(plain_rng_state(state))):
        set_rng_state(restored)
        assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected
