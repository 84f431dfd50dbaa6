"""An mmcv 1.x config (mtrain's schema) → an mmengine config, with a report.

``to_mmengine(cfg_dict)`` pops the mmcv keys one concept at a time (loop,
optimizer, schedules, data, evaluation, hooks, environment) and writes their
mmengine counterparts; whatever is left is a helper variable (``data_root``,
``img_norm_cfg``) and is kept. Each decision is an entry of the report.
"""

import copy
from typing import Any, Dict, Optional, Tuple

from ..defaults import (BY_EPOCH_KEYS, MMCV_CHECKPOINT, RUNNER_LENGTH_KEY, RUNNER_LOOP,
                        fill_runner_defaults, runner_by_epoch)
from ..utils.errors import ConfigError
from . import schedule_to_mmengine as sched
from .ddp_keys import ddp_to_mmengine
from .ema import ema_to_mmengine
from .evaluation import metric_to_evaluator, save_best_key
from .paramwise import as_mmengine, mmengine_differs, uniform_base_lr
from .report import ConversionReport
from .scale_lr import carry_auto_scale_lr
from .table import DISPLAY_ONLY_HOOKS, LOGGER_BACKENDS
from .val_points import val_rule_to_mmengine

_LOADER_KEYS = {'samples_per_gpu': 'batch_size', 'workers_per_gpu': 'num_workers',
                'persistent_workers': 'persistent_workers', 'pin_memory': 'pin_memory',
                'prefetch_factor': 'prefetch_factor', 'drop_last': 'drop_last'}
#: mtrain-only keys: (values that ask for what mmengine does anyway, why any other is lossy).
#: tests/config_convert/test_runtime_evidence.py shows each behaviour in both frameworks.
_MTRAIN_ONLY = {
    'batch_processor': ((dict(type='BasicBatchProcessor'), ), "mmengine's model.train_step "
                        'runs the step; another batch processor (or its options) has no '
                        'counterpart'),
    'nan_policy': ((None, ), 'mmengine checks no loss for NaN/inf and steps on: a non-finite '
                   "loss makes the weights NaN where 'skip' keeps them, or 'stop' stops"),
    'device': ((None, ), "mmengine picks the device itself (CUDA when available): an explicit "
               "device is not kept"),
    'channels_last': ((False, ), 'mmengine has no memory-format option: the model and 4-D '
                      'batches stay contiguous (the same values, other kernels)'),
}
_DROPPED = ('gpu_ids', 'gpu_id', 'filename', 'total_epochs')
_ENV_KEYS = ('cudnn_benchmark', 'dist_params', 'mp_start_method', 'opencv_num_threads')
_SAME = ('model', 'work_dir', 'log_level', 'custom_imports', 'compile',
         'load_from')


def to_mmengine(cfg: Dict[str, Any], metric_classes: Optional[Dict[str, str]] = None
                ) -> Tuple[Dict[str, Any], ConversionReport]:
    """Convert a resolved mmcv 1.x config dict; returns ``(mmengine dict, report)``.

    ``metric_classes``: 1.x metric name → the registered metric class computing it
    (:func:`~.evaluation.metric_to_evaluator`).
    """
    src = copy.deepcopy(dict(cfg))
    report = ConversionReport('mmcv 1.x', 'mmengine')
    out: Dict[str, Any] = {}
    for key in _SAME:
        if key in src:
            out[key] = src.pop(key)
            report.exact(key, key)
    carry_auto_scale_lr(src, out, report)
    loop = _loop(src, out, report)
    base_lr = uniform_base_lr(src.get('optimizer'))
    _data(src, out, report)
    _optim(src, out, report)
    _schedules(src, out, loop, report, base_lr)
    _evaluation(src, out, loop, report, metric_classes)
    _hooks(src, out, loop, report)
    _environment(src, out, report)
    ddp_to_mmengine(src, out, report)
    _mtrain_only(src, report)
    for key in _DROPPED:
        if key in src:
            report.note(key, '(dropped)', 'no effect in mmengine' if key != 'total_epochs'
                        else 'read as train_cfg.max_epochs')
            src.pop(key)
    for key in list(src):  # helper variables (data_root, img_norm_cfg, ...)
        out[key] = src.pop(key)
    return out, report


def _mtrain_only(src: Dict[str, Any], report: ConversionReport) -> None:
    """Dropped: a note where the value asks for mmengine's behaviour, else lossy with why."""
    for key, (same, why) in _MTRAIN_ONLY.items():
        if key not in src:
            continue
        value = src.pop(key)
        if value in same:
            report.note(key, '(dropped)', f"{key}={value!r}: mmengine's own behaviour")
        else:
            report.lossy(key, '(dropped)', f'{key} is mtrain-only: {why}')


def _loop(src: Dict[str, Any], out: Dict[str, Any], report: ConversionReport) -> sched.Loop:
    """``runner`` → ``train_cfg``; the runner type's hook defaults written out in ``src``."""
    runner = dict(src.pop('runner', None) or {})
    if not runner and src.get('total_epochs') is not None:
        runner = dict(type='EpochBasedRunner', max_epochs=src['total_epochs'])
    kind = runner.pop('type', 'EpochBasedRunner')
    if kind not in RUNNER_LOOP:
        report.lossy('runner.type', 'train_cfg', f"'{kind}' has no mmengine loop")
        kind = 'EpochBasedRunner'
    length_key = RUNNER_LENGTH_KEY[kind]
    other = [k for k in RUNNER_LENGTH_KEY.values() if k != length_key and k in runner]
    if other or length_key not in runner:
        found = f'runner.{other[0]} is set, but ' if other else ''
        raise ConfigError(f'{found}{kind} needs runner.{length_key}; set runner.{length_key}=N',
                          key=f'runner.{other[0] if other else length_key}')
    out['train_cfg'] = dict(type=RUNNER_LOOP[kind], **{length_key: runner.pop(length_key)})
    loop = (runner_by_epoch(kind), out['train_cfg'][length_key])
    report.exact('runner', 'train_cfg')
    for key in runner:
        report.lossy(f'runner.{key}', '(dropped)', 'not an argument of the mmengine loop')
    # mmcv's register_training_hooks gives the runner's by_epoch to hooks that omit it;
    # mmengine's hooks have their own defaults, so every one is written out.
    src.update(fill_runner_defaults(kind, {k: src[k] for k in BY_EPOCH_KEYS if k in src}))
    return loop


def _loader(common: Dict[str, Any], override: Dict[str, Any], dataset: Any,
            shuffle: bool, report: ConversionReport, key: str) -> Dict[str, Any]:
    args = {**common, **override}
    shuffle = args.pop('shuffle', True) and shuffle
    loader = {_LOADER_KEYS[k]: v for k, v in args.items() if k in _LOADER_KEYS}
    for name in sorted(set(args) - set(_LOADER_KEYS)):
        report.lossy(f'{key}.{name}', '(dropped)', 'not a DataLoader argument mmengine reads')
    loader.setdefault('batch_size', 1)
    loader.setdefault('num_workers', 0)
    loader.setdefault('persistent_workers', loader['num_workers'] > 0)  # mtrain's default
    loader['sampler'] = dict(type='DefaultSampler', shuffle=shuffle)
    loader['dataset'] = dataset
    return loader


def _data(src: Dict[str, Any], out: Dict[str, Any], report: ConversionReport) -> None:
    data = dict(src.pop('data', None) or {})
    splits = {s: data.pop(s) for s in ('train', 'val', 'test') if s in data}
    overrides = {s: dict(data.pop(f'{s}_dataloader', None) or {}) for s in splits}
    for split, dataset in splits.items():
        out[f'{split}_dataloader'] = _loader(data, overrides[split], dataset, split == 'train',
                                             report, f'data.{split}_dataloader')
        report.exact(f'data.{split}', f'{split}_dataloader')
    sampler = out.get('train_dataloader', {}).get('sampler', {})
    if sampler.get('shuffle') and src.get('seed') is not None:
        sampler['seed'] = src['seed']  # else mmengine's DefaultSampler draws a seed of its own
        report.note('seed', 'train_dataloader.sampler.seed', "mtrain's train sampler is seeded "
                    "by the run's seed, mmengine's DefaultSampler by its own seed argument")


def _optim(src: Dict[str, Any], out: Dict[str, Any], report: ConversionReport) -> None:
    optimizer = dict(src.pop('optimizer', None) or {})
    wrapper: Dict[str, Any] = dict(type='OptimWrapper', optimizer=optimizer)
    constructor = optimizer.pop('constructor', None)
    if optimizer.get('paramwise_cfg') is not None:
        _paramwise(optimizer.pop('paramwise_cfg'), wrapper, constructor, report)
    if constructor in ('DefaultOptimizerConstructor', 'DefaultOptimWrapperConstructor'):
        wrapper['constructor'] = 'DefaultOptimWrapperConstructor'
    elif constructor is not None:
        wrapper['constructor'] = constructor
        report.lossy('optimizer.constructor', 'optim_wrapper.constructor',
                     f"'{constructor}' must exist in mmengine as an optim wrapper constructor")
    report.exact('optimizer', 'optim_wrapper.optimizer')
    hook = src.pop('optimizer_config', {})
    if hook is None:
        report.lossy('optimizer_config', 'optim_wrapper', 'None means no optimizer step in '
                     'mmcv; mmengine always steps')
        hook = {}
    hook = dict(hook)
    kind = hook.pop('type', 'OptimizerHook')
    if kind in ('GradientCumulativeOptimizerHook', 'GradientCumulativeFp16OptimizerHook'):
        wrapper['accumulative_counts'] = hook.pop('cumulative_iters', 1)
        report.exact('optimizer_config.cumulative_iters', 'optim_wrapper.accumulative_counts')
    elif kind not in ('OptimizerHook', 'Fp16OptimizerHook'):
        report.lossy('optimizer_config.type', 'optim_wrapper', f"'{kind}' has no counterpart")
    if hook.get('grad_clip') is not None:
        wrapper['clip_grad'] = dict(hook.pop('grad_clip'))
        report.exact('optimizer_config.grad_clip', 'optim_wrapper.clip_grad')
    hook.pop('grad_clip', None)
    fp16 = src.pop('fp16', None)
    if kind.endswith('Fp16OptimizerHook'):  # fp16 arguments given in optimizer_config itself
        moved = [k for k in hook if k != 'detect_anomalous_params']
        fp16 = {**(fp16 or {}), **{k: hook.pop(k) for k in moved}}
    if fp16 is not None:
        _amp(dict(fp16), wrapper, report)
    for key in hook:
        report.lossy(f'optimizer_config.{key}', '(dropped)', 'OptimWrapper has no such option')
    out['optim_wrapper'] = wrapper


def _paramwise(paramwise_cfg: Dict[str, Any], wrapper: Dict[str, Any], constructor: Any,
               report: ConversionReport) -> None:
    """mmcv's ``paramwise_cfg`` for mmengine's rules: the same values wherever they can be."""
    if constructor == 'DefaultOptimWrapperConstructor':  # mtrain's copy of mmengine's rules
        wrapper['paramwise_cfg'] = paramwise_cfg
        report.exact('optimizer.paramwise_cfg', 'optim_wrapper.paramwise_cfg')
        return
    wrapper['paramwise_cfg'] = as_mmengine(paramwise_cfg)
    reasons = mmengine_differs(wrapper['paramwise_cfg'])
    if reasons:
        report.lossy('optimizer.paramwise_cfg', 'optim_wrapper.paramwise_cfg', '; '.join(
            reasons) + ' (for a model with such parameters)')
    elif wrapper['paramwise_cfg'] != paramwise_cfg:
        report.note('optimizer.paramwise_cfg', 'optim_wrapper.paramwise_cfg', 'norm_decay_mult=1 '
                    "written out: mmengine's bias_decay_mult would reach norm biases otherwise")
    else:
        report.exact('optimizer.paramwise_cfg', 'optim_wrapper.paramwise_cfg')


def _amp(fp16: Dict[str, Any], wrapper: Dict[str, Any], report: ConversionReport) -> None:
    wrapper['type'] = 'AmpOptimWrapper'
    if 'loss_scale' in fp16:
        wrapper['loss_scale'] = fp16.pop('loss_scale')
        report.exact('fp16.loss_scale', 'optim_wrapper.loss_scale')
    else:
        wrapper['loss_scale'] = 512.
        report.note('fp16', 'optim_wrapper.loss_scale=512.', "Fp16OptimizerHook's default is a "
                    "static scale of 512; AmpOptimWrapper's is 'dynamic': written out")
    if 'dtype' in fp16:
        wrapper['dtype'] = fp16.pop('dtype')
    for key in fp16:
        report.lossy(f'fp16.{key}', '(dropped)', 'AmpOptimWrapper has no such option')


def _schedules(src: Dict[str, Any], out: Dict[str, Any], loop: sched.Loop,
               report: ConversionReport, base_lr: Any) -> None:
    schedulers = []
    if src.get('lr_config') is not None:
        schedulers += sched.lr_schedulers(src['lr_config'], loop, report, base_lr)
    if src.get('momentum_config') is not None:
        schedulers += sched.momentum_schedulers(src['momentum_config'], loop, report,
                                                out.get('optim_wrapper', {}).get('optimizer'))
    src.pop('lr_config', None), src.pop('momentum_config', None)
    out['param_scheduler'] = schedulers


def _evaluation(src: Dict[str, Any], out: Dict[str, Any], loop: sched.Loop,
                report: ConversionReport, metric_classes: Optional[Dict[str, str]]) -> None:
    workflow = [tuple(w) for w in src.pop('workflow', [('train', 1)])]
    if any(mode == 'val' for mode, _ in workflow):
        report.lossy('workflow', '(dropped)', "('val', N) phases (val losses after training "
                     'epochs) have no mmengine counterpart; ValLoop computes metrics only')
    evaluation = dict(src.pop('evaluation', None) or {})
    if not evaluation or 'val_dataloader' not in out:
        for split in ('val', 'test'):  # mmengine wants a loader, a loop and an evaluator
            if out.pop(f'{split}_dataloader', None) is not None:
                report.note(f'data.{split}', '(dropped)', 'no evaluation: mmengine needs '
                            f'{split}_cfg and {split}_evaluator with {split}_dataloader')
        return
    interval, start = evaluation.pop('interval', 1), evaluation.pop('start', None)
    by_epoch = evaluation.pop('by_epoch', loop[0])
    if by_epoch != loop[0]:
        units = ('epoch', 'iteration') if by_epoch else ('iteration', 'epoch')
        report.lossy('evaluation.by_epoch', 'train_cfg.val_interval', f'mmcv evaluates by '
                     f'{units[0]} (by_epoch={by_epoch}), mmengine validates in the unit of '
                     f'its loop: every {interval} {units[1]}s')
    out['train_cfg'].update(val_rule_to_mmengine(start, interval, loop, report))
    evaluator = metric_to_evaluator(evaluation.pop('metric', 'accuracy'), report,
                                    metric_classes)
    if evaluator is None:
        for split in ('val', 'test'):
            out.pop(f'{split}_dataloader', None)
        out['train_cfg'].pop('val_interval', None), out['train_cfg'].pop('val_begin', None)
        return
    out['val_cfg'] = dict(type='ValLoop')
    out['val_evaluator'] = evaluator
    for key in ('save_best', 'rule'):
        if key in evaluation:
            value = evaluation.pop(key)
            if key == 'save_best' and isinstance(value, str) and value != 'auto':
                value = save_best_key(value, 'mmengine', evaluator)
            out.setdefault('_checkpoint_extra', {})[key] = value
            report.note(f'evaluation.{key}', f'default_hooks.checkpoint.{key}', 'metric names '
                        "differ: mtrain 'accuracy' is mmengine's Accuracy 'accuracy/top1'; "
                        'other classes prefix theirs (coco/bbox_mAP)')
    for key in evaluation:
        report.lossy(f'evaluation.{key}', '(dropped)', "an argument of the dataset's "
                     'evaluate(); the metric class takes its own (val_evaluator)')
    report.exact('evaluation', 'train_cfg.val_interval, val_cfg, val_evaluator')
    if 'test_dataloader' in out:
        out['test_cfg'] = dict(type='TestLoop')
        out['test_evaluator'] = dict(out['val_evaluator'])


def _hooks(src: Dict[str, Any], out: Dict[str, Any], loop: sched.Loop,
           report: ConversionReport) -> None:
    hooks: Dict[str, Any] = dict(timer=dict(type='IterTimerHook'), logger=None,
                                 param_scheduler=dict(type='ParamSchedulerHook'),
                                 checkpoint=None, sampler_seed=dict(type='DistSamplerSeedHook'))
    hooks['checkpoint'] = _checkpoint(src.pop('checkpoint_config', None), out, loop, report)
    log = src.pop('log_config', None)
    if log is not None:
        hooks['logger'] = dict(type='LoggerHook', interval=log.get('interval', 10))
        out['visualizer'] = dict(type='Visualizer', vis_backends=_backends(log, out, report))
        report.exact('log_config.interval', 'default_hooks.logger.interval')
    out['default_hooks'] = hooks
    custom = src.pop('custom_hooks', None)
    if custom:
        out['custom_hooks'] = [ema_to_mmengine(hook, f'custom_hooks.{i}', report)
                               if hook.get('type') == 'EMAHook' else hook
                               for i, hook in enumerate(custom)]
        report.note('custom_hooks', 'custom_hooks', 'passed through: each type must exist in '
                    'mmengine (or your scope) with the same arguments')


def _checkpoint(ckpt: Any, out: Dict[str, Any], loop: sched.Loop,
                report: ConversionReport) -> Any:
    """``checkpoint_config`` (``by_epoch`` already the runner's) → mmengine's ``CheckpointHook``."""
    extra = out.pop('_checkpoint_extra', {})
    if ckpt is None and not extra:
        return None  # mmcv registers no checkpoint hook; mmengine's default is switched off
    ckpt = dict(ckpt or dict(MMCV_CHECKPOINT, by_epoch=loop[0]))
    if ckpt.get('by_epoch') and not loop[0] and not extra:
        report.note('checkpoint_config', 'default_hooks.checkpoint=None', 'by_epoch=True under '
                    "IterBasedRunner saves nothing in mmcv (no epoch ends); mmengine's would "
                    'save at the end of its one epoch, so it is switched off')
        return None
    for key in ('async_save', 'create_symlink', 'sharded'):
        if key in ckpt:
            report.lossy(f'checkpoint_config.{key}', '(dropped)', 'mtrain-only option')
            ckpt.pop(key)
    ckpt.update(extra)
    report.exact('checkpoint_config', 'default_hooks.checkpoint (by_epoch written out: '
                 "mmengine's CheckpointHook counts epochs unless told)")
    return dict(type='CheckpointHook', **ckpt)


def _backends(log: Dict[str, Any], out: Dict[str, Any], report: ConversionReport) -> list:
    backends = []
    for i, hook in enumerate(log.get('hooks', [dict(type='TextLoggerHook')])):
        hook = dict(hook)
        kind = hook.pop('type')
        if kind in DISPLAY_ONLY_HOOKS:
            report.note(f'log_config.hooks.{i}', '(dropped)', f'{kind} only draws a progress '
                        "bar on the terminal; mmengine's logger prints the log lines")
            continue
        if kind not in LOGGER_BACKENDS:
            report.lossy(f'log_config.hooks.{i}', '(dropped)', f"'{kind}' has no vis backend")
            continue
        if 'by_epoch' in hook:
            out['log_processor'] = dict(by_epoch=hook.pop('by_epoch'))
        backend = dict(type=LOGGER_BACKENDS[kind])
        if 'init_kwargs' in hook:
            backend['init_kwargs'] = hook.pop('init_kwargs')
        for key in hook:
            report.lossy(f'log_config.hooks.{i}.{key}', '(dropped)',
                         f'{backend["type"]} takes no {key}')
        backends.append(backend)
        report.exact(f'log_config.hooks.{i}', f'visualizer.vis_backends: {backend["type"]}')
    return backends


def _environment(src: Dict[str, Any], out: Dict[str, Any], report: ConversionReport) -> None:
    randomness = {k: src.pop(k) for k in ('seed', 'deterministic') if k in src}
    if randomness:
        out['randomness'] = randomness
        report.exact(', '.join(randomness), 'randomness')
    env, sources = {}, [k for k in _ENV_KEYS if k in src]
    if 'cudnn_benchmark' in src:
        env['cudnn_benchmark'] = src.pop('cudnn_benchmark')
    if 'dist_params' in src:
        env['dist_cfg'] = src.pop('dist_params')
    mp = {k: src.pop(k) for k in ('mp_start_method', 'opencv_num_threads') if k in src}
    if mp:
        env['mp_cfg'] = mp
    if env:
        out['env_cfg'] = env
        report.exact(', '.join(sources), 'env_cfg')
    if src.get('resume_from') is not None:
        out['load_from'], out['resume'] = src['resume_from'], True
        report.exact('resume_from', 'load_from + resume=True')
    elif src.get('auto_resume'):
        out['resume'] = True
        report.exact('auto_resume', 'resume=True')
    src.pop('resume_from', None), src.pop('auto_resume', None)
    wrapper = src.pop('model_wrapper', None)
    if wrapper is not None:
        wrapper = dict(wrapper)
        if wrapper.get('type', 'MTDistributedDataParallel') != 'MTDistributedDataParallel':
            report.lossy('model_wrapper.type', 'model_wrapper_cfg', f"'{wrapper['type']}' "
                         'has no mmengine counterpart')
        wrapper['type'] = 'MMDistributedDataParallel'
        out['model_wrapper_cfg'] = wrapper
        report.exact('model_wrapper', 'model_wrapper_cfg')
