"""Where each name of mmcv 1.7.2's runner side lives when the import route is on.

A name asked of a routed module (``mmcv.runner``, ``mmcv.parallel``,
``mmcv.engine``, any module under them, ``mmcv.utils.registry``) resolves, in
this order, to:

1. :data:`ROUTED`: a name whose mtrain home is not ``mtrain.<name>``;
2. mtrain's own name (``mtrain.EpochBasedRunner``, ``mtrain.HOOKS``, ...);
3. a name mmcv's own file imports: that name where the file takes it from;
4. a name mmcv's own file defines (for a package, the module its
   ``__init__`` imports it from; ``CheckpointLoader`` -> ``checkpoint.py``):
   mmcv's own implementation, loaded from its file with its relative imports
   routed (:mod:`.mmcv_own`). These are the names mtrain does not have;
   ``python -m mtrain.compat.run --list-mmcv-own`` prints the ones a run used.

A submodule's own function that only shares a package-level name is mmcv's
(``mmcv.parallel._functions.scatter``); whether mmcv has a name is read from
its files (:mod:`.mmcv_source`) so a probe for a missing name runs nothing.
"""

from typing import Dict, Tuple

#: mmcv 1.7.2's ``__all__`` of each routed package (what ``import *`` gives).
PACKAGE_ALL: Dict[str, Tuple[str, ...]] = {
    'mmcv.runner': (
        'BaseModule', 'BaseRunner', 'CheckpointHook', 'CheckpointLoader', 'ClearMLLoggerHook',
        'ClosureHook', 'CosineAnnealingLrUpdaterHook', 'CosineAnnealingMomentumUpdaterHook',
        'CosineRestartLrUpdaterHook', 'CyclicLrUpdaterHook', 'CyclicMomentumUpdaterHook',
        'DefaultOptimizerConstructor', 'DefaultRunnerConstructor', 'DistEvalHook',
        'DistSamplerSeedHook', 'DvcliveLoggerHook', 'EMAHook', 'EpochBasedRunner', 'EvalHook',
        'ExpLrUpdaterHook', 'FixedLrUpdaterHook', 'FlatCosineAnnealingLrUpdaterHook',
        'Fp16OptimizerHook', 'GradientCumulativeFp16OptimizerHook',
        'GradientCumulativeOptimizerHook', 'HOOKS', 'Hook', 'InvLrUpdaterHook',
        'IterBasedRunner', 'IterLoader', 'IterTimerHook', 'LinearAnnealingLrUpdaterHook',
        'LinearAnnealingMomentumUpdaterHook', 'LogBuffer', 'LoggerHook', 'LossScaler',
        'LrUpdaterHook', 'MlflowLoggerHook', 'ModuleDict', 'ModuleList', 'MomentumUpdaterHook',
        'NeptuneLoggerHook', 'OPTIMIZERS', 'OPTIMIZER_BUILDERS', 'OneCycleLrUpdaterHook',
        'OneCycleMomentumUpdaterHook', 'OptimizerHook', 'PaviLoggerHook', 'PolyLrUpdaterHook',
        'Priority', 'RUNNERS', 'Runner', 'SegmindLoggerHook', 'Sequential', 'StepLrUpdaterHook',
        'StepMomentumUpdaterHook', 'SyncBuffersHook', 'TensorboardLoggerHook', 'TextLoggerHook',
        'WandbLoggerHook', '_load_checkpoint', '_load_checkpoint_with_prefix',
        'allreduce_grads', 'allreduce_params', 'auto_fp16', 'build_optimizer',
        'build_optimizer_constructor', 'build_runner', 'force_fp32', 'get_dist_info',
        'get_host_info', 'get_priority', 'get_time_str', 'init_dist', 'load_checkpoint',
        'load_state_dict', 'master_only', 'obj_from_dict', 'save_checkpoint',
        'set_random_seed', 'weights_to_cpu', 'wrap_fp16_model'),
    'mmcv.parallel': ('DataContainer', 'MMDataParallel', 'MMDistributedDataParallel',
                      'MODULE_WRAPPERS', 'collate', 'is_module_wrapper', 'scatter',
                      'scatter_kwargs'),
    'mmcv.engine': ('collect_results_cpu', 'collect_results_gpu', 'multi_gpu_test',
                    'single_gpu_test'),
}

_ENGINE = ('collect_results_cpu', 'collect_results_gpu', 'multi_gpu_test', 'single_gpu_test')
_RUNNER_BUILDER = ('build_runner', 'build_runner_constructor', 'DefaultRunnerConstructor')
_RUNNER_UTILS = ('get_host_info', 'get_time_str', 'obj_from_dict')

#: name -> (module, attribute) where ``mtrain.<name>`` is not the right one.
ROUTED: Dict[str, Tuple[str, str]] = {
    **{n: ('mtrain.evaluation', n) for n in _ENGINE},
    **{n: ('mtrain.compat.runner_builder', n) for n in _RUNNER_BUILDER},
    **{n: ('mtrain.compat.runner_utils', n) for n in _RUNNER_UTILS},
    'RUNNER_BUILDERS': ('mtrain.registry', 'RUNNER_BUILDERS'),
    'Registry': ('mtrain.compat.registry', 'Registry'),
    'build_from_cfg': ('mtrain.compat.registry', 'build_from_cfg'),
    'annealing_cos': ('mtrain.hooks.schedules.formulas', 'annealing_cos'),
    'annealing_linear': ('mtrain.hooks.schedules.formulas', 'annealing_linear'),
}
