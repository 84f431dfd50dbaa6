"""``activation_checkpointing`` through the builder: applied to the model, or one line."""

import os.path as osp
import types

import pytest

from mtrain.config import load_config, parse_cfg_options
from mtrain.runner import build_runner
from mtrain.utils import ConfigError, get_logger

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
DIGITS = osp.join(ROOT, 'configs', 'digits', 'lenet_digits.py')


def _build(tmp_path, modules):
    cfg = load_config(DIGITS, parse_cfg_options([f'activation_checkpointing.modules={modules}']))
    return build_runner(cfg, str(tmp_path), get_logger(), seed=0)[0]


def test_the_demo_config_checkpoints_the_named_modules_of_the_built_model(tmp_path):
    runner = _build(tmp_path, "['features.0','Linear']")
    model = runner.model_wrapper.module
    chosen = [name for name, m in model.named_modules()
              if isinstance(m.__dict__.get('forward'), types.MethodType)]
    assert chosen == ['features.0', 'head.0', 'head.3']


def test_a_typo_is_a_config_error_naming_the_key_before_training(tmp_path):
    with pytest.raises(ConfigError) as err:
        _build(tmp_path, "['featurs']")
    assert err.value.key == 'activation_checkpointing.modules.0'
    assert "Did you mean 'features'" in str(err.value)
