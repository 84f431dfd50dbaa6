"""Run mmcv 1.7.2's own runner, fp16, BaseModule, parallel and registry tests through the route.

::

    python bench/mmcv_own_tests.py [--mmcv-git DIR] [--python PY] [-- pytest args]

exports ``tests/`` of mmcv's tag ``v1.7.2`` from a clone of mmcv
(``--mmcv-git``, a git dir; default ``/work/.mirror/open-mmlab+mmcv/repo``) into a
temporary folder with ``git archive`` (nothing is written into this
repository), adds a ``conftest.py`` that enables the import route before
anything imports mmcv, and runs :data:`SUITES` with ``PY -m pytest`` (``--python``,
default: tests/mmcv_python.py's interpreter, one with mmcv 1.7.2, pytest and
pytest-timeout: a test that hangs fails after ``--timeout`` seconds)
on the CPU. It prints pytest's summary; docs/migration.md lists each failure
with the deliberate difference behind it. Outside CI: it takes minutes.
"""

import argparse
import os
import os.path as osp
import subprocess
import sys
import tempfile

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
SUITES = ('tests/test_runner', 'tests/test_parallel.py', 'tests/test_utils/test_registry.py',
          'tests/test_cnn/test_model_registry.py')
CONFTEST = ('"""Written by bench/mmcv_own_tests.py: the route, before anything imports mmcv."""\n'
            'from mtrain.compat import mmcv as route\n\nroute.enable()\n')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--mmcv-git', default='/work/.mirror/open-mmlab+mmcv/repo')
    parser.add_argument('--python', default=None)
    parser.add_argument('--timeout', type=int, default=120,
                        help='seconds a test may take (pytest-timeout); a hang is a failure')
    parser.add_argument('pytest_args', nargs='*')
    args = parser.parse_args()
    python = args.python or _mmcv_python()
    with tempfile.TemporaryDirectory(prefix='mmcv-own-tests-') as root:
        archive = subprocess.run(['git', f'--git-dir={args.mmcv_git}', 'archive', 'v1.7.2',
                                  'tests'], capture_output=True, check=True).stdout
        subprocess.run(['tar', '-x', '-C', root], input=archive, check=True)
        with open(osp.join(root, 'conftest.py'), 'w') as f:
            f.write(CONFTEST)
        env = dict(os.environ, PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES='')
        command = [python, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', '-rfE',
                   f'--timeout={args.timeout}', *SUITES, *args.pytest_args]
        return subprocess.run(command, cwd=root, env=env).returncode


def _mmcv_python() -> str:
    sys.path.insert(0, osp.join(REPO, 'tests'))
    import mmcv_python  # noqa: E402  (tests/mmcv_python.py: one list of candidates)
    for python in mmcv_python.candidates():
        probe = 'import mmcv, pytest_timeout; print(mmcv.__version__)'
        done = subprocess.run([python, '-c', probe], capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.strip() == '1.7.2':
            return python
    raise SystemExit('no Python with mmcv 1.7.2 and pytest-timeout found: pass --python')


if __name__ == '__main__':
    sys.exit(main())
