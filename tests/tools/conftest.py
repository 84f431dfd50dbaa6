"""Load the scripts in tools/ as modules so tests can call their ``main(argv)`` in-process."""

import importlib.util
import os.path as osp

import pytest

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def load_tool(name: str):
    spec = importlib.util.spec_from_file_location(f'tools_{name}', osp.join(ROOT, 'tools', f'{name}.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
