"""Load the scripts in tools/ as modules so tests can call their ``main(argv)`` in-process."""

import os.path as osp
import textwrap

import pytest
from tool_loader import ROOT, load_tool  # tests/tool_loader.py


@pytest.fixture(scope='session')
def train_tool():
    return load_tool('train')


@pytest.fixture(scope='session')
def test_tool():
    return load_tool('test')


@pytest.fixture(scope='session')
def repo_root():
    return ROOT


@pytest.fixture(scope='session')
def tool():
    """``tool('analyze_logs')``: any script in tools/ as a module."""
    return load_tool


@pytest.fixture
def digits_config(tmp_path, monkeypatch):
    """``digits_config(user_module, body)``: a config over the digits demo importing a module.

    ``user_module`` (source text) becomes a module of its own name in
    ``tmp_path``, imported by the config's ``custom_imports``; ``body`` is
    the rest of the config. Returns the config's path.
    """
    monkeypatch.syspath_prepend(str(tmp_path))
    made = []

    def make(user_module: str, body: str) -> str:
        made.append(body)
        module = f'user_{osp.basename(tmp_path)}_{len(made)}'.replace('-', '_')
        (tmp_path / f'{module}.py').write_text(user_module)
        path = tmp_path / f'{module}_cfg.py'
        path.write_text(f"_base_ = ['{osp.join(ROOT, 'configs', 'digits', 'lenet_digits.py')}']\n"
                        f"custom_imports = dict(imports=['{module}'])\n" + textwrap.dedent(body))
        return str(path)
    return make
