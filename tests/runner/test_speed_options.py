"""The speed switches of a config: ``compile = dict(...)`` and ``channels_last = True``."""

import logging
import os

import pytest
import torch

from mtrain.config import load_config
from mtrain.runner import build_runner
from mtrain.utils import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _digits(**options):
    config = os.path.join(ROOT, 'configs', 'digits', 'lenet_digits.py')
    return load_config(config, dict({'runner.max_epochs': 1, 'data.samples_per_gpu': 512,
                                     'evaluation': None}, **options))


@pytest.mark.slow  # TorchDynamo's first trace takes seconds
def test_compiled_model_trains_and_saves_plain_parameter_names(tmp_path):
    cfg = _digits()
    cfg.compile = dict(backend='eager')  # dynamo without a code generator: fast, no compiler
    runner, loaders, workflow = build_runner(cfg, str(tmp_path), logging.getLogger('t'), seed=0)
    assert runner.model_wrapper.module._compiled_call_impl is not None
    runner.run(loaders, workflow)
    state = torch.load(tmp_path / 'latest.pth', weights_only=True)['state_dict']
    assert set(state) == set(runner.model_wrapper.module.state_dict())
    assert not any('_orig_mod' in k for k in state)


@pytest.mark.parametrize('value, match', [
    (dict(mdoe='max-autotune'), "no argument 'mdoe'. Did you mean 'mode'?"),
    ('max-autotune', 'compile must be True, None or a dict')])
def test_bad_compile_config_names_the_key(tmp_path, value, match):
    cfg = _digits()
    cfg.compile = value
    with pytest.raises(ConfigError, match=match) as info:
        build_runner(cfg, str(tmp_path), logging.getLogger('t'), seed=0)
    assert info.value.key.startswith('compile')


def test_top_level_channels_last_switches_the_batch_processor(tmp_path):
    cfg = _digits()
    cfg.channels_last = True
    runner, loaders, workflow = build_runner(cfg, str(tmp_path), logging.getLogger('t'), seed=0)
    assert runner.batch_processor.channels_last
    runner.run(loaders, workflow)  # one epoch: the model and the batches were converted
    conv = runner.model_wrapper.module.features[3].weight  # 64x32x3x3
    assert conv.is_contiguous(memory_format=torch.channels_last)
    assert not conv.is_contiguous()
