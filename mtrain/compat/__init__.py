"""Running code written for mmcv 1.x unchanged.

* :class:`Registry` / :func:`build_from_cfg`: mmcv 1.x's registry contract
  (parents across packages, scopes, ``build_func``) on mmengine's class.
* :mod:`mtrain.compat.mmcv`: the import route that makes ``mmcv.runner``,
  ``mmcv.parallel``, ``mmcv.engine`` and the runner-side names of
  ``mmcv.utils`` resolve to mtrain: ``python -m mtrain.compat.run script.py``,
  or ``MTRAIN_MMCV_ROUTE=1`` in the environment once
  ``python -m mtrain.compat.install`` has run (:mod:`.autoroute`), see
  docs/migration.md.

The names are imported on first use, so the start-up hook of
:mod:`.autoroute` imports nothing heavy.
"""

import importlib
from typing import Any

__all__ = ['Registry', 'build_from_cfg']


def __getattr__(name: str) -> Any:
    if name in __all__:
        value = getattr(importlib.import_module('mtrain.compat.registry'), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'mtrain.compat' has no attribute '{name}'")
