"""Running code written for mmcv 1.x unchanged.

* :class:`Registry` / :func:`build_from_cfg`: mmcv 1.x's registry contract
  (parents across packages, scopes, ``build_func``) on mmengine's class.
* :mod:`mtrain.compat.mmcv`: the import route that makes ``mmcv.runner``,
  ``mmcv.parallel``, ``mmcv.engine`` and the runner-side names of
  ``mmcv.utils`` resolve to mtrain (``MTRAIN_MMCV_COMPAT=1`` or
  ``python -m mtrain.compat.run script.py ...``), see docs/migration.md.
"""

from .registry import Registry, build_from_cfg

__all__ = ['Registry', 'build_from_cfg']
