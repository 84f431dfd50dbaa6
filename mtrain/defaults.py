"""The one table of defaults: per runner type (mmcv 1.x schema) and per config schema.

Every default a config leaves out, and that more than one part of mtrain
must agree on, is written here once: the runner's hook registration
(:mod:`mtrain.runner.hook_registration`), the builder (``evaluation``) and the
config converter (:mod:`mtrain.config_convert`) all read these tables, so the
runner and the converter cannot disagree on what an omitted key means. This
module imports nothing from mtrain (a leaf, like ``mtrain.utils``).

mmcv 1.7.2's ``IterBasedRunner.register_training_hooks`` gives
``by_epoch=False`` to ``checkpoint_config``, ``lr_config`` and each
``log_config.hooks`` entry that does not set it; mmdet 2.x's ``train_detector``
does the same for ``evaluation``; mtrain adds ``momentum_config`` so a paired
lr/momentum schedule counts one unit (docs/migration.md)::

    fill_runner_defaults('IterBasedRunner', dict(lr_config=dict(policy='step', step=[8])))
    # {'lr_config': {'policy': 'step', 'step': [8], 'by_epoch': False}}

mmengine 0.10 has no runner-wide default: each hook and loop has its own
(``CheckpointHook`` counts epochs even under ``IterBasedTrainLoop``, where the
loop's single "epoch" ends with the run, so it writes one checkpoint).
"""

import copy
from typing import Any, Callable, Dict, Optional, Sequence, Union

# ---------------------------------------------------------------- mmcv 1.x schema

#: Each runner type's unit (``by_epoch``); only an iteration runner writes it into hook configs.
RUNNER_BY_EPOCH: Dict[str, bool] = {'EpochBasedRunner': True, 'IterBasedRunner': False}

#: The run-length key of each runner type, and the mmengine loop it corresponds to.
RUNNER_LENGTH_KEY: Dict[str, str] = {'EpochBasedRunner': 'max_epochs',
                                     'IterBasedRunner': 'max_iters'}
RUNNER_LOOP: Dict[str, str] = {'EpochBasedRunner': 'EpochBasedTrainLoop',
                               'IterBasedRunner': 'IterBasedTrainLoop'}

#: The top-level hook configs that take the runner's ``by_epoch`` default.
#: ``log_config`` means each entry of ``log_config.hooks``.
BY_EPOCH_KEYS = ('lr_config', 'momentum_config', 'checkpoint_config', 'log_config',
                 'evaluation')

#: mmcv 1.7.2 class defaults the converter needs to know.
MMCV_CHECKPOINT = dict(interval=-1, by_epoch=True, save_last=True)
MMCV_LOG_INTERVAL = 10  # log_config.interval when left out (TextLoggerHook's default)
MMCV_LOGGER_HOOKS = [dict(type='TextLoggerHook')]  # log_config.hooks when left out
MMCV_EVALUATION = dict(interval=1, start=None)

#: mmcv 1.7.2 ``EvalHook``'s keys of metrics that are better greater, and smaller.
METRIC_GREATER_KEYS = ('acc', 'top', 'AR@', 'auc', 'precision', 'mAP', 'mDice', 'mIoU', 'mAcc',
                       'aAcc')
METRIC_LESS_KEYS = ('loss', )

Keys = Optional[Union[str, Sequence[str]]]


def metric_rule(key: str, rule: Optional[str] = None, greater_keys: Keys = None,
                less_keys: Keys = None) -> Optional[str]:
    """``'greater'`` or ``'less'``: which values of metric ``key`` are better.

    ``rule`` (``evaluation.rule``) when given; else mmcv 1.7.2's
    ``EvalHook._init_rule``: ``key`` equal to one of the greater keys, then of the
    less keys, then containing one, case-insensitively (``greater_keys``/``less_keys``
    replace the defaults, as in ``evaluation``). None: the key says neither
    (``'mae'``, ``'EPE'``): the caller asks for ``rule``.
    """
    if rule is not None:
        return rule
    lowered = key.lower()
    greater = [k.lower() for k in _key_list(greater_keys, METRIC_GREATER_KEYS)]
    less = [k.lower() for k in _key_list(less_keys, METRIC_LESS_KEYS)]
    for keys, found in ((greater, 'greater'), (less, 'less')):
        if lowered in keys:
            return found
    for keys, found in ((greater, 'greater'), (less, 'less')):
        if any(k in lowered for k in keys):
            return found
    return None


def _key_list(keys: Keys, default: Sequence[str]) -> Sequence[str]:
    if keys is None:
        return default
    return (keys, ) if isinstance(keys, str) else keys

# ---------------------------------------------------------------- mmengine 0.10 schema

#: What mmengine's ``Runner`` registers for each ``default_hooks`` entry a config omits.
MMENGINE_DEFAULT_HOOKS: Dict[str, Dict[str, Any]] = dict(
    runtime_info=dict(type='RuntimeInfoHook'), timer=dict(type='IterTimerHook'),
    sampler_seed=dict(type='DistSamplerSeedHook'), logger=dict(type='LoggerHook'),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', interval=1))

#: mmengine 0.10 hook class defaults (``CheckpointHook`` counts epochs by default).
MMENGINE_CHECKPOINT = dict(interval=-1, by_epoch=True, save_last=True)
MMENGINE_LOG_INTERVAL = 10
MMENGINE_LOG_PROCESSOR = dict(by_epoch=True)

#: mmengine 0.10 train loops: run-length key and validation defaults.
MMENGINE_LOOPS: Dict[str, Dict[str, Any]] = {
    'EpochBasedTrainLoop': dict(length_key='max_epochs', by_epoch=True, val_begin=1,
                                val_interval=1),
    'IterBasedTrainLoop': dict(length_key='max_iters', by_epoch=False, val_begin=1,
                               val_interval=1000),
}
#: ``train_cfg=dict(by_epoch=...)`` without a ``type`` picks one of the two loops.
MMENGINE_LOOP_OF_BY_EPOCH = {True: 'EpochBasedTrainLoop', False: 'IterBasedTrainLoop'}

#: ``IterBasedTrainLoop.max_epochs``: 1 ("for compatibility with EpochBasedTrainLoop").
MMENGINE_ITER_LOOP_EPOCHS = 1


def mmengine_scheduler_end(by_epoch: bool, max_epochs: Optional[int],
                           max_iters: Optional[int]) -> Optional[int]:
    """The ``end`` mmengine's ``Runner`` gives a ``param_scheduler`` entry that leaves it out.

    ``Runner.build_param_scheduler`` fills in the loop's ``max_epochs`` (by-epoch
    schedulers) or ``max_iters``. An iteration loop (``max_epochs`` None here, as
    mtrain's ``IterBasedRunner``) has ``max_epochs = 1``, so a by-epoch scheduler
    ends after one epoch, also when ``convert_to_iter_based`` turns that into the
    loader's length in iterations. None: a length the caller does not know.
    """
    if not by_epoch:
        return max_iters
    return MMENGINE_ITER_LOOP_EPOCHS if max_epochs is None else max_epochs


def runner_by_epoch(runner_type: Any) -> bool:
    """The ``by_epoch`` default of ``runner_type``, a name or a class.

    A subclass (a user's ``MyIterRunner(IterBasedRunner)``) takes the default
    of the nearest class in its MRO that the table names; any other runner
    counts epochs, as mmcv's ``BaseRunner`` does.
    """
    if isinstance(runner_type, str):
        return RUNNER_BY_EPOCH.get(runner_type, True)
    for cls in getattr(runner_type, '__mro__', ()):
        if cls.__name__ in RUNNER_BY_EPOCH:
            return RUNNER_BY_EPOCH[cls.__name__]
    return True


def fill_runner_defaults(runner_type: Any, configs: Dict[str, Any],
                         takes_by_epoch: Optional[Callable[[Dict[str, Any]], bool]] = None
                         ) -> Dict[str, Any]:
    """``configs`` with ``by_epoch=False`` where a hook config leaves it out (iteration runners).

    Under an epoch runner nothing is filled in (as mmcv 1.7.2, whose
    ``EpochBasedRunner`` keeps ``register_training_hooks`` as it is): each
    hook class's own default applies.

    Args:
        runner_type: the runner's type name (or class).
        configs: some of :data:`BY_EPOCH_KEYS` and their values (dicts, built
            hooks or None); other keys are returned as they are.
        takes_by_epoch: whether a hook config's type has a ``by_epoch``
            argument (the runner asks its hook registry; ``policy='Torch'``
            has none). Default: every config takes it.

    Returns:
        A new dict; the values passed in are not changed. Applying it twice
        gives the same result as once.
    """
    by_epoch = runner_by_epoch(runner_type)
    if by_epoch:  # class defaults: True for most, False for OneCycle (which refuses True)
        return dict(configs)
    takes = takes_by_epoch or (lambda cfg: True)

    def fill(cfg: Any) -> Any:
        if not isinstance(cfg, dict) or 'by_epoch' in cfg or not takes(cfg):
            return cfg
        return dict(copy.deepcopy(cfg), by_epoch=by_epoch)

    out = dict(configs)
    for key in BY_EPOCH_KEYS:
        value = out.get(key)
        if key == 'log_config' and isinstance(value, dict):
            hooks = value.get('hooks', MMCV_LOGGER_HOOKS)
            out[key] = dict(value, hooks=[fill(h) for h in hooks])
        elif key in out:
            out[key] = fill(value)
    return out
