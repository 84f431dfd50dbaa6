"""SPACE files: reading them, and every mistake reported before the first trial."""

import os

import pytest

from mtrain.sweep import load_space, loguniform
from mtrain.sweep.space import Distribution
from mtrain.sweep.space_check import check_space
from mtrain.utils import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, 'configs', 'digits', 'lenet_digits.py')


def _space(tmp_path, text):
    path = tmp_path / 'space.py'
    path.write_text(text)
    return str(path)


def test_the_demo_space_reads_and_fits_the_demo_config():
    path = os.path.join(ROOT, 'configs', 'digits', 'lr_space.py')
    space = load_space(path)
    assert space['optimizer.lr'] == Distribution('float', 1e-4, 1.0, log=True)
    assert space['optimizer.weight_decay'].choices == (0, 1e-4, 5e-4)
    check_space(space, CONFIG, path)


def test_nested_dicts_and_dotted_keys_mean_the_same(tmp_path):
    path = _space(tmp_path, "optimizer = dict(lr=loguniform(0.01, 0.1))\n"
                            "space = {'lr_config.warmup_iters': intrange(0, 40, step=10)}\n"
                            "_helper = 3\n")
    space = load_space(path)
    assert list(space) == ['lr_config.warmup_iters', 'optimizer.lr']
    assert space['optimizer.lr'] == loguniform(0.01, 0.1)
    check_space(space, CONFIG, path)


@pytest.mark.parametrize('text, message', [
    ("space = {'optimizer.lrr': loguniform(1e-3, 0.1)}",
     "key `optimizer.lrr`: the config .*lenet_digits.py has no key 'optimizer.lrr'. "
     "Did you mean 'optimizer.lr'"),
    ("space = {'optimzer.momentum': [0.8, 0.9]}", "Did you mean 'optimizer.momentum'"),
    ("space = {'runner.max_epochs': uniform(2, 5)}",
     'takes an integer: use intrange.* \\(the config has 10\\)'),
    ("space = {'optimizer.type': [1, 2]}", "takes a string \\(the config has 'SGD'\\)"),
    ("space = {'optimizer.momentum': uniform(0.5, 1.5)}",
     r'must lie in \[0, 1\], but the space gives uniform\(0.5, 1.5\)'),
    ("space = {'optimizer.lr': [0.1, -0.1]}", r'must lie in \(0, inf\)'),
    ("space = {'log_config.hooks': [1, 2]}", "is a list .*search over its items by their "
     "own keys, e.g. 'log_config.hooks.0'"),
    ("space = {'optimizer.type': ['SGD', 'Adamm']}", "the optimizer does not take 'Adamm': "
     "'Adamm' is not a registered optimizer.*Did you mean 'Adam'"),
    ("space = {'optimizer.momentum': [0, 0.9]}", 'the optimizer does not take 0: .*Nesterov '
     'momentum requires a momentum'),
])
def test_a_mistake_in_the_space_is_one_clear_error(tmp_path, text, message):
    path = _space(tmp_path, text)
    with pytest.raises(ConfigError, match=message) as error:
        check_space(load_space(path), CONFIG, path)
    assert str(error.value).startswith(path) and '\n' not in str(error.value)


@pytest.mark.parametrize('text, message', [
    ("space = {'optimizer.lr': loguniforn(1e-3, 0.1)}", "name 'loguniforn' is not defined. "
     "Did you mean 'loguniform'"),
    ("space = {'optimizer.lr': loguniform(0, 0.1)}", 'low must be > 0'),
    ("space = {'optimizer.lr': uniform(0.1, 0.01)}", 'low must be smaller than high'),
    ("space = {'lr_config.warmup_iters': intrange(0, 45, step=10)}",
     'high - low must be a multiple of step'),
    ("space = {'optimizer.lr': 0.1}", 'is not a distribution'),
    ("space = {'model.width': [16, 16]}", 'choice values repeat'),
    ("space = {'optimizer': [dict(lr=1)]}", 'choice values must be None, bool, int'),
    ("space = {}", 'the search space is empty'),
    ("space = {'optimizer.lr': [0.1,}", 'Python syntax error at line 1'),
])
def test_a_malformed_space_file_is_one_clear_error(tmp_path, text, message):
    path = _space(tmp_path, text)
    with pytest.raises(ConfigError, match=message):
        load_space(path)


@pytest.mark.parametrize('text, message', [
    ("from mtrain.sweep import loguniformm\nspace = {'optimizer.lr': loguniformm(1e-3, 1)}",
     "line 1: cannot import name 'loguniformm' .*Did you mean 'loguniform'.* no import is "
     'needed'),
    ("import math\nspace = {'optimizer.lr': math.lgo(1e-3)}",
     "line 2: AttributeError: module 'math' has no attribute 'lgo'. .*fix that line"),
    ("from mtrain.sweeps import uniform", "line 1: No module named 'mtrain.sweeps'"),
    ("lrs = {}\nspace = {'optimizer.lr': lrs['sgd']}", "line 2: KeyError: 'sgd'"),
])
def test_any_exception_in_the_space_file_is_one_line_naming_it(tmp_path, text, message):
    """Issue 33 item 10: mistakes other than the four handled kinds were tracebacks."""
    path = _space(tmp_path, text)
    with pytest.raises(ConfigError, match=message) as error:
        load_space(path)
    assert str(error.value).startswith(path) and '\n' not in str(error.value)


def test_a_missing_space_file(tmp_path):
    with pytest.raises(ConfigError, match='does not exist; check --space'):
        load_space(str(tmp_path / 'nope.py'))
