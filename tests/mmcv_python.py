"""Where the tests find a Python with mmcv 1.7.2 (it pins mmcv 1.x, so not mtrain's venv).

One list for every test that compares against mmcv 1.7.2 itself: ``$MMCV_PYTHON``, then
``$MTRAIN_MMCV_PYTHON``, then ``/work/venv-mmcv`` and ``venv-mmcv`` beside this venv. How
to make one: the docstring of tests/compat/test_mmcv_e2e.py.
"""

import functools
import os
import subprocess
import sys
from typing import Optional, Sequence

import pytest

SETUP = 'tests/compat/test_mmcv_e2e.py shows how to make one'


def candidates() -> list:
    """The interpreters to try, in order."""
    found = [os.environ.get('MMCV_PYTHON'), os.environ.get('MTRAIN_MMCV_PYTHON'),
             '/work/venv-mmcv/bin/python',
             os.path.join(os.path.dirname(sys.prefix), 'venv-mmcv', 'bin', 'python')]
    return list(dict.fromkeys(p for p in found if p and os.access(p, os.X_OK)))


def find(probe: str, wanted: Sequence[str], needs: str) -> Optional[str]:
    """The first interpreter whose ``python -c probe`` prints ``wanted``, else a skip.

    Args:
        probe: code printing the versions to compare, space-separated.
        wanted: the expected versions (a version ``X`` also matches ``X+local``).
        needs: what the test needs, for the skip message.
    """
    for python in candidates():
        got = [v.split('+')[0] for v in _printed(python, probe).split()]
        if got == [v.split('+')[0] for v in wanted]:
            return python
    pytest.skip(f'needs a Python with {needs}: set MMCV_PYTHON ({SETUP})')


@functools.lru_cache(maxsize=None)
def _printed(python: str, probe: str) -> str:
    """What ``python -c probe`` prints ('' if it fails): asked once per test process (a probe
    imports mmcv, a second or two, and a dozen tests ask the same one)."""
    result = subprocess.run([python, '-c', probe], capture_output=True, text=True)
    return result.stdout if result.returncode == 0 else ''
