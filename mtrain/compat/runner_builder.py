"""mmcv 1.x's ``build_runner(cfg, default_args)`` and its runner-constructor extension point.

1.x training functions build their runner as::

    runner = build_runner(cfg.runner, default_args=dict(model=model, batch_processor=None,
                          optimizer=optimizer, work_dir=cfg.work_dir, logger=logger, meta=meta))

``cfg.runner`` may name a ``constructor`` registered in ``RUNNER_BUILDERS``
(default ``DefaultRunnerConstructor``), called with no arguments to make the
runner; the default builds ``cfg.runner['type']`` from mtrain's ``RUNNERS``.
(``mtrain.runner.build_runner(cfg, work_dir, logger)`` assembles a whole run
from a config; this is mmcv's smaller function of the same name.)
"""

import copy
from typing import Any, Optional

from ..registry import RUNNER_BUILDERS, RUNNERS
from .registry import build_from_cfg


@RUNNER_BUILDERS.register_module()
class DefaultRunnerConstructor:
    """Build ``runner_cfg`` from ``RUNNERS``; subclass it to change how a runner is made.

    Args:
        runner_cfg: ``dict(type='EpochBasedRunner', max_epochs=...)``.
        default_args: what the caller supplies (model, optimizer, work_dir, ...).
    """

    def __init__(self, runner_cfg: dict, default_args: Optional[dict] = None) -> None:
        if not isinstance(runner_cfg, dict):
            raise TypeError(f'runner_cfg should be a dict, but got {type(runner_cfg)}')
        self.runner_cfg = runner_cfg
        self.default_args = default_args

    def __call__(self) -> Any:
        return build_from_cfg(self.runner_cfg, RUNNERS, default_args=self.default_args)


def build_runner_constructor(cfg: dict) -> Any:
    """The constructor ``cfg['type']`` from ``RUNNER_BUILDERS``."""
    return RUNNER_BUILDERS.build(cfg)


def build_runner(cfg: dict, default_args: Optional[dict] = None) -> Any:
    """The runner ``cfg`` describes, made by its ``constructor`` (mmcv 1.7.2's function)."""
    runner_cfg = copy.deepcopy(cfg)
    constructor_type = runner_cfg.pop('constructor', 'DefaultRunnerConstructor')
    constructor = build_runner_constructor(
        dict(type=constructor_type, runner_cfg=runner_cfg, default_args=default_args))
    return constructor()
