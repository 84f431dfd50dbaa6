"""Where each name of mmcv 1.7.2's runner side lives when the import route is on.

A name asked of a routed module (``mmcv.runner``, ``mmcv.parallel``,
``mmcv.engine``, any module under them, ``mmcv.utils.registry``) resolves, in
this order, to:

1. :data:`ROUTED`: a name whose mtrain home is not ``mtrain.<name>``;
2. mtrain's own name (``mtrain.EpochBasedRunner``, ``mtrain.HOOKS``, ...);
3. for a submodule, the same name in mmcv's own file of that submodule, and for
   a package, :data:`MMCV_OWN`: mmcv's own implementation, loaded from its
   file with its relative imports routed (so ``fp16_utils`` finds mtrain's
   ``allreduce_grads``). These are the names mtrain does not have (yet);
   ``python -m mtrain.compat.run --list-mmcv-own`` prints the ones a run used.
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

#: name -> (module, attribute) where ``mtrain.<name>`` is not the right one.
ROUTED: Dict[str, Tuple[str, str]] = {
    **{n: ('mtrain.evaluation', n) for n in _ENGINE},
    **{n: ('mtrain.compat.runner_builder', n) for n in _RUNNER_BUILDER},
    'RUNNER_BUILDERS': ('mtrain.registry', 'RUNNER_BUILDERS'),
    'Registry': ('mtrain.compat.registry', 'Registry'),
    'build_from_cfg': ('mtrain.compat.registry', 'build_from_cfg'),
    'annealing_cos': ('mtrain.hooks.schedules.formulas', 'annealing_cos'),
    'annealing_linear': ('mtrain.hooks.schedules.formulas', 'annealing_linear'),
}

def wrapper_home(name: str) -> Tuple[str, str]:
    """mtrain's wrapper once mtrain unpacks DataContainers itself, else the interim one."""
    import mtrain
    if hasattr(mtrain, 'scatter_kwargs'):
        return 'mtrain', name
    return 'mtrain.compat.interim_wrappers', name


#: Names whose home is decided when first asked (see :func:`wrapper_home`).
DECIDED_LATE = {'MMDataParallel': wrapper_home, 'MMDistributedDataParallel': wrapper_home}

#: Package-level names mtrain does not have: mmcv's file that defines each.
MMCV_OWN: Dict[str, str] = {
    **{n: 'mmcv.runner.base_module' for n in ('BaseModule', 'Sequential', 'ModuleList',
                                              'ModuleDict')},
    **{n: 'mmcv.runner.fp16_utils' for n in ('auto_fp16', 'force_fp32', 'wrap_fp16_model',
                                             'LossScaler')},
    **{n: 'mmcv.runner.utils' for n in ('get_host_info', 'get_time_str', 'obj_from_dict')},
    'CheckpointLoader': 'mmcv.runner.checkpoint',
    'PaviLoggerHook': 'mmcv.runner.hooks.logger.pavi',
    'SegmindLoggerHook': 'mmcv.runner.hooks.logger.segmind',
    'DataContainer': 'mmcv.parallel.data_container',
    'collate': 'mmcv.parallel.collate',
    'scatter': 'mmcv.parallel.scatter_gather',
    'scatter_kwargs': 'mmcv.parallel.scatter_gather',
}
