"""Install the mmcv import route: ``python -m mtrain.compat.install [--mmcv]``.

::

    python -m mtrain.compat.install --mmcv     # mmcv 1.7.2 (pure Python) + the start-up line
    python -m mtrain.compat.install            # only the start-up line
    MTRAIN_MMCV_ROUTE=1 bash tools/dist_train.sh configs/cfg.py 2
    python -m mtrain.compat.install --remove   # the start-up line

``--mmcv`` installs mmcv 1.7.2 without its compiled ops, which is all the
route needs, in the one way that works in a venv made by the README's steps:
mmcv 1.7.2's ``setup.py`` imports ``pkg_resources``, which setuptools 81
dropped (torch brings a newer one, and no ``wheel``), so it first pins
``setuptools>=77.0.3,<81`` (77.0.3: torch's floor) and ``wheel``, then builds
mmcv with ``MMCV_WITH_OPS=0 --no-build-isolation``. pip keeps the built wheel
in its cache, so a second venv installs it without building.

The start-up line is ``mtrain_mmcv_route.pth`` in the ``site-packages`` of
the Python that runs this (see :mod:`mtrain.compat.autoroute`); the same with
``pip install -e .`` and a regular install, as it does not go through pip.
Without the variable the line costs one environment lookup per interpreter
start. ``pip uninstall mtrain`` does not remove it (pip did not write it): run
``--remove`` first; a left-over line without mtrain does nothing unless the
variable is set, and then fails with ``No module named 'mtrain'``.
"""

import argparse
import os
import os.path as osp
import subprocess
import sys
import sysconfig
from typing import List, Optional

from .autoroute import PTH_LINE, PTH_NAME

#: What ``--mmcv`` runs, in order (``pip`` is this Python's).
MMCV_STEPS = (
    (['install', 'setuptools>=77.0.3,<81', 'wheel'], {}),
    (['install', '--no-build-isolation', 'mmcv==1.7.2'], {'MMCV_WITH_OPS': '0'}),
)


def pth_path(site_dir: Optional[str] = None) -> str:
    """Where the line goes: ``site_dir``, default this interpreter's ``purelib``."""
    return osp.join(site_dir or sysconfig.get_paths()['purelib'], PTH_NAME)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog='python -m mtrain.compat.install', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--mmcv', action='store_true',
                        help='also install mmcv 1.7.2 without compiled ops (runs pip)')
    parser.add_argument('--remove', action='store_true', help='remove the line instead')
    parser.add_argument('--site-dir', help="a site directory (default: this Python's "
                                           'site-packages)')
    args = parser.parse_args(argv)
    path = pth_path(args.site_dir)
    if args.remove:
        if osp.exists(path):
            os.remove(path)
        print(f'removed {path}')
        return
    if args.mmcv:
        install_mmcv()
    with open(path, 'w') as f:
        f.write(PTH_LINE)
    print(f'wrote {path}: MTRAIN_MMCV_ROUTE=1 now turns the mmcv route on in every process '
          'of this Python')


def install_mmcv() -> None:
    """Run :data:`MMCV_STEPS` with this Python's pip; stop at the first that fails."""
    for pip_args, env in MMCV_STEPS:
        command = [sys.executable, '-m', 'pip', *pip_args]
        print('+', ' '.join(f'{k}={v}' for k, v in env.items()), ' '.join(command[2:]),
              flush=True)
        done = subprocess.run(command, env=dict(os.environ, **env))
        if done.returncode != 0:
            raise SystemExit(f'`pip {" ".join(pip_args)}` failed (exit {done.returncode}); '
                             'see pip\'s message above')


if __name__ == '__main__':
    main()
