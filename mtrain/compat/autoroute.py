"""The route turned on from the environment: ``MTRAIN_MMCV_ROUTE=1``, in every process.

``python -m mtrain.compat.install`` writes one line into the interpreter's
``site-packages`` (``mtrain_mmcv_route.pth``); Python runs it at start-up. It
reads ``MTRAIN_MMCV_ROUTE`` and, when it is set, calls :func:`arm`, which
imports nothing heavy: it puts a finder on ``sys.meta_path`` that enables the
route at the moment something first imports ``mmcv``. So a repository's own
``dist_train.sh`` (``python -m torch.distributed.launch ... train.py``,
``torchrun train.py``), whose rank processes inherit the environment, runs
every rank through the route without a changed launch line::

    MTRAIN_MMCV_ROUTE=1 bash tools/dist_train.sh configs/my_config.py 2

Values: ``1`` routes mmcv's runner side to mtrain; ``mmcv-runner`` keeps
mmcv's own runner and adds only the uncompiled-ops placeholder (as
``python -m mtrain.compat.run --mmcv-runner``); empty or ``0``: off.
"""

import importlib
import importlib.abc
import os
import sys
from typing import Any

ENV = 'MTRAIN_MMCV_ROUTE'
PTH_NAME = 'mtrain_mmcv_route.pth'
#: The start-up line (one line: ``site`` runs a .pth line that starts with ``import``).
PTH_LINE = (f"import os; os.environ.get('{ENV}', '0') not in ('', '0') and "
            "__import__('mtrain.compat.autoroute').compat.autoroute.arm()\n")


class _ArmedFinder(importlib.abc.MetaPathFinder):
    """Enables the route when ``mmcv`` is first imported, then steps aside."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname == 'mmcv':
            sys.meta_path.remove(self)
            mode = os.environ.get(ENV, '1')
            importlib.import_module('mtrain.compat.mmcv').enable(route=mode != 'mmcv-runner')
        return None  # the usual finders load mmcv, now behind the route's


def arm() -> None:
    """Enable the route when ``mmcv`` is first imported (at once if it already was: an error)."""
    if 'mmcv' in sys.modules:
        importlib.import_module('mtrain.compat.mmcv').enable()  # says the route came too late
    if not any(isinstance(f, _ArmedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _ArmedFinder())
