"""Run an mmengine ``param_scheduler`` chain on mtrain's optimizer.

mtrain trains mmengine-schema configs with mmengine's own scheduler classes
(``mmengine.optim.scheduler``), stepped the way mmengine's loops step them:
by-iteration schedulers after every training iteration, by-epoch ones after
every training epoch, both after the optimizer step (here: caught up before the
next iteration, which gives the same values). ``tools/train.py``
registers this hook for a config's ``param_scheduler``::

    param_scheduler = [
        dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=500),
        dict(type='MultiStepLR', milestones=[8, 11], gamma=0.1, by_epoch=True, end=12),
    ]

A missing ``end`` is mmengine's default (:func:`mtrain.defaults.mmengine_scheduler_end`:
the run's length, one epoch in an iteration loop), and ``convert_to_iter_based=True``
uses the train loader's length, both as in mmengine's ``Runner``.
"""

import copy
from typing import Any, Dict, List, Optional, Sequence

from mmengine.optim import scheduler as _mmengine_schedulers  # noqa: F401 (registers them)
from mmengine.registry import PARAM_SCHEDULERS

from ..defaults import mmengine_scheduler_end
from ..registry import HOOKS
from ..utils.errors import ConfigError, did_you_mean
from .hook import Hook

_GROUP_KEYS = ('lr', 'momentum', 'betas', 'initial_lr', 'initial_momentum', 'max_lr', 'min_lr')


@HOOKS.register_module()
class ParamSchedulerHook(Hook):
    """Build mmengine schedulers on ``runner.optimizer`` and step them.

    The schedulers are built before the first training iteration, when the
    train loader's length is known (``convert_to_iter_based`` needs it).
    Building applies each scheduler's step-0 value, as mmengine does; after a
    resume the optimizer's restored values are put back and the schedulers'
    saved states loaded, so a resumed run continues the same curve.

    Args:
        param_scheduler: a scheduler dict or a list of them, mmengine's schema.
        stepped: False for ``default_hooks.param_scheduler=None`` in an
            mmengine config: mmengine then builds the schedulers (applying
            their step-0 values) and never steps them.
    """

    priority = 'LOW'  # mmengine's ParamSchedulerHook's; after mtrain's own LR hooks

    def __init__(self, param_scheduler: Any, stepped: bool = True) -> None:
        self.stepped = stepped
        items = [param_scheduler] if isinstance(param_scheduler, dict) else param_scheduler
        self.configs = [dict(copy.deepcopy(s)) for s in items]
        known = sorted(PARAM_SCHEDULERS.module_dict)
        for i, cfg in enumerate(self.configs):
            if cfg.get('type') not in PARAM_SCHEDULERS.module_dict:
                raise ConfigError(f"unknown scheduler type {cfg.get('type')!r}."
                                  f"{did_you_mean(str(cfg.get('type')), known)} mmengine's "
                                  f"schedulers: {', '.join(known)}.",
                                  key=f'param_scheduler.{i}.type')
        self.schedulers: Optional[List[Any]] = None
        self.steps: List[int] = []  # steps taken by each scheduler since step 0
        self._saved: Optional[Dict[str, Any]] = None

    def before_train_iter(self, runner) -> None:
        if self.schedulers is None:
            self.schedulers = self._build(runner)
        if not self.stepped:
            return
        # mmengine steps after each iteration (by-iteration ones first) and after each
        # epoch; stepping up to the current position here gives the same values, lets
        # the logger report the lr this iteration uses, and makes a resume catch up.
        epoch = runner.epoch if runner.max_epochs else 0  # mmengine's iteration loop
        for by_epoch, target in ((False, runner.iter), (True, epoch)):  # never ends an epoch
            for i, scheduler in enumerate(self.schedulers):
                while scheduler.by_epoch == by_epoch and self.steps[i] < target:
                    scheduler.step()
                    self.steps[i] += 1

    def _build(self, runner) -> List[Any]:
        """mmengine's ``Runner.build_param_scheduler`` for one optimizer."""
        groups = [{k: g[k] for k in _GROUP_KEYS if k in g} for g in runner.optimizer.param_groups]
        epoch_length = len(runner.data_loader)
        schedulers = []
        for i, cfg in enumerate(self.configs):
            cfg = copy.deepcopy(cfg)
            cfg.setdefault('end', mmengine_scheduler_end(  # an explicit None stays: no end
                cfg.get('by_epoch', True), runner.max_epochs, runner.max_iters))
            try:
                schedulers.append(PARAM_SCHEDULERS.build(cfg, default_args=dict(
                    optimizer=runner.optimizer, epoch_length=epoch_length)))
            except (TypeError, ValueError, AssertionError, KeyError) as e:
                raise ConfigError(f"{cfg['type']} could not be built: {e}",
                                  key=f'param_scheduler.{i}') from e
        if self._saved is not None:  # resumed: the optimizer already holds the right values
            for group, values in zip(runner.optimizer.param_groups, groups):
                group.update(values)
            for scheduler, state in zip(schedulers, self._saved['schedulers']):
                scheduler.load_state_dict(state)
        self.steps = list(self._saved['steps']) if self._saved else [0] * len(schedulers)
        return schedulers

    def state_dict(self) -> Dict[str, Any]:
        if self.schedulers is None:
            return dict(self._saved or dict(schedulers=[], steps=[]))
        # Without the bound annealing functions (OneCycle's): a checkpoint holds plain data.
        return dict(schedulers=[{k: v for k, v in s.state_dict().items() if not callable(v)}
                                for s in self.schedulers], steps=list(self.steps))

    def load_state_dict(self, state: Dict[str, Sequence[Dict[str, Any]]]) -> None:
        self._saved = dict(state) if state.get('schedulers') else None
        self.schedulers = None
