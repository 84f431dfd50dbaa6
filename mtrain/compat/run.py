"""Run a script written for mmcv 1.x with mtrain as its runner: ``python -m mtrain.compat.run``.

::

    python -m mtrain.compat.run tools/train.py configs/my_config.py --work-dir work
    torchrun --nproc_per_node 2 -m mtrain.compat.run tools/train.py cfg.py --launcher pytorch
    python -m mtrain.compat.run --mmcv-runner tools/train.py cfg.py   # mmcv's own runner

The script (a codebase's own ``tools/train.py``, unmodified) runs as
``__main__`` after :func:`mtrain.compat.mmcv.enable`: its ``mmcv.runner``,
``mmcv.parallel`` and ``mmcv.engine`` are mtrain's. ``--mmcv-runner`` keeps
mmcv's own runner and only stands in for uncompiled ops (to compare the two).
``--list-mmcv-own`` prints, at exit, the names that still came from mmcv's own
files (what mtrain does not provide yet). ``--list-ops`` prints, at exit, each
``mmcv._ext`` op the run called and what served it (mtrain's implementation,
or "not implemented"); calling an op mtrain lacks ends the run with that one
line (:class:`mtrain.compat.ops.ext.MissingOpError`), without a traceback.
"""

import argparse
import atexit
import os.path as osp
import runpy
import sys
from typing import List, Optional

from . import mmcv as route
from .ops import ext


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog='python -m mtrain.compat.run', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--mmcv-runner', action='store_true',
                        help="keep mmcv's own runner (only the ops placeholder)")
    parser.add_argument('--list-mmcv-own', action='store_true',
                        help="print, at exit, the names taken from mmcv's own files")
    parser.add_argument('--list-ops', action='store_true',
                        help='print, at exit, the mmcv._ext ops called and what served each')
    parser.add_argument('script', help='the Python script to run (e.g. tools/train.py)')
    parser.add_argument('args', nargs=argparse.REMAINDER, help="the script's arguments")
    args = parser.parse_args(argv)
    if not osp.isfile(args.script):
        parser.error(f'no such script: {args.script}')
    route.enable(route=not args.mmcv_runner)
    if args.list_mmcv_own:
        atexit.register(lambda: print('mmcv-own names used:', sorted(route.used_mmcv_own)))
    if args.list_ops:
        atexit.register(lambda: print('mmcv ops called:', *ext.report() or ['none'],
                                      sep='\n  '))
    sys.argv = [args.script, *args.args]
    sys.path.insert(0, osp.dirname(osp.abspath(args.script)))
    try:
        runpy.run_path(args.script, run_name='__main__')
    except ext.MissingOpError as e:
        sys.exit(f'error: {e}')  # the message says which op, who called it, what to do


if __name__ == '__main__':
    main()
