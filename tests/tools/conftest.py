"""Load the scripts in tools/ as modules so tests can call their ``main(argv)`` in-process."""

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
