"""Install (or remove) the start-up line that honours ``MTRAIN_MMCV_ROUTE``: ``python -m mtrain.compat.install``.

::

    python -m mtrain.compat.install            # once per environment (venv, conda env)
    MTRAIN_MMCV_ROUTE=1 bash tools/dist_train.sh configs/cfg.py 2
    python -m mtrain.compat.install --remove

It writes ``mtrain_mmcv_route.pth`` into the ``site-packages`` of the Python
that runs it (see :mod:`mtrain.compat.autoroute`); the same with ``pip
install -e .`` and a regular install, as it does not go through pip. Without
the variable the line costs one environment lookup per interpreter start.
``pip uninstall mtrain`` does not remove it (pip did not write it): run
``--remove`` first; a left-over line without mtrain does nothing unless the
variable is set, and then fails with ``No module named 'mtrain'``.
"""

import argparse
import os
import os.path as osp
import sysconfig
from typing import List, Optional

from .autoroute import PTH_LINE, PTH_NAME


def pth_path(site_dir: Optional[str] = None) -> str:
    """Where the line goes: ``site_dir``, default this interpreter's ``purelib``."""
    return osp.join(site_dir or sysconfig.get_paths()['purelib'], PTH_NAME)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog='python -m mtrain.compat.install', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
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
    with open(path, 'w') as f:
        f.write(PTH_LINE)
    print(f'wrote {path}: MTRAIN_MMCV_ROUTE=1 now turns the mmcv route on in every process '
          'of this Python')


if __name__ == '__main__':
    main()
