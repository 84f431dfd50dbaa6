"""An mmengine config → an mmcv 1.x config (mtrain's schema), with a report.

Used two ways: ``tools/convert_config.py --to mmcv`` writes the result, and
``tools/train.py`` trains from it in memory with ``keep_schedulers=True``,
where ``param_scheduler`` is not translated but handed whole to
:class:`~mtrain.hooks.ParamSchedulerHook`, which runs mmengine's own scheduler
classes (so every chain, ``begin``/``end`` and ``convert_to_iter_based`` works).
"""

import copy
from typing import Any, Dict, List, Optional, Tuple

from ..defaults import (MMENGINE_CHECKPOINT, MMENGINE_LOG_INTERVAL, MMENGINE_LOOP_OF_BY_EPOCH,
                        MMENGINE_LOOPS, RUNNER_LOOP)
from ..utils.errors import ConfigError
from . import schedule_to_mmcv as sched
from .ddp_keys import ddp_to_mmcv
from .default_hooks import read_default_hooks, schedules_step
from .ema import ema_to_mmcv
from .evaluation import evaluator_to_metric, save_best_key
from .loaders_to_mmcv import loaders_to_mmcv
from .paramwise import mmengine_differs, uniform_base_lr
from .report import ConversionReport
from .scale_lr import carry_auto_scale_lr
from .table import LOGGER_BACKENDS, UNSUPPORTED
from .val_points import val_rule_to_mmcv

_BACKEND_HOOKS = {v: k for k, v in LOGGER_BACKENDS.items()}
_BACKEND_ARGS = {'WandbVisBackend': ('init_kwargs', ), 'MLflowVisBackend': ('exp_name', 'tags',
                                                                           'params')}
_SAME = ('model', 'work_dir', 'log_level', 'custom_imports')
_DROPPED = ('default_scope', 'launcher', 'val_cfg', 'test_cfg', 'experiment_name')


def to_mmcv(cfg: Dict[str, Any], keep_schedulers: bool = False
            ) -> Tuple[Dict[str, Any], ConversionReport]:
    """Convert a resolved mmengine config dict; returns ``(mmcv 1.x dict, report)``."""
    src = copy.deepcopy(dict(cfg))
    report = ConversionReport('mmengine', 'mmcv 1.x')
    out: Dict[str, Any] = {}
    for key in UNSUPPORTED:
        if key in src:
            report.lossy(key, '(unsupported)', UNSUPPORTED[key])
            src.pop(key)
    for key in _SAME:
        if key in src:
            out[key] = src.pop(key)
            report.exact(key, key)
    _drop_scopes(src, report)
    carry_auto_scale_lr(src, out, report)
    loop = _loop(src, out, report)
    loaders_to_mmcv(src, out, report)
    _optim(src, out, report, keep_schedulers)
    slots = read_default_hooks(src, report)
    scheduler_hooks = _schedules(src, out, loop, report, keep_schedulers, schedules_step(slots))
    _evaluation(src, out, loop, report, keep_schedulers)
    user_hooks = _custom_hooks(src, report)
    default_hooks = _hooks(slots, src, out, loop, report)
    _assemble_hooks(out, scheduler_hooks, default_hooks, user_hooks)
    ddp_to_mmcv(src, out, report)
    _environment(src, out, report)
    for key in _DROPPED:
        if key in src:
            report.note(key, '(dropped)', 'no effect in mtrain')
            src.pop(key)
    for key in list(src):
        out[key] = src.pop(key)
    return out, report


def _drop_scopes(src: Dict[str, Any], report: ConversionReport) -> None:
    """``_scope_`` on the runtime sections (set by a ``'package::...'`` ``_base_``): mmengine
    builds their loop and wrapper in that package's registries; mtrain's runner has its own.
    Where a registry builds the value (``model``, datasets, schedulers) it stays."""
    for key in ('train_cfg', 'optim_wrapper', 'default_hooks', 'env_cfg', 'log_processor',
                'visualizer', 'randomness', 'val_cfg', 'test_cfg'):
        if isinstance(src.get(key), dict) and '_scope_' in src[key]:
            src[key] = {k: v for k, v in src[key].items() if k != '_scope_'}
            report.note(f'{key}._scope_', '(dropped)', "the registry scope of a package's "
                        "_base_; mtrain's runner sections take no scope")


def _loop(src: Dict[str, Any], out: Dict[str, Any], report: ConversionReport) -> sched.Loop:
    train = dict(src.pop('train_cfg', None) or {})
    kind = train.pop('type', None) or MMENGINE_LOOP_OF_BY_EPOCH[bool(train.get('by_epoch', True))]
    train.pop('by_epoch', None)
    if kind not in MMENGINE_LOOPS:
        report.lossy('train_cfg.type', 'runner', f"'{kind}' has no mtrain runner")
        kind = 'EpochBasedTrainLoop'
    loop_defaults = MMENGINE_LOOPS[kind]
    length_key = loop_defaults['length_key']
    other = [k for k in ('max_epochs', 'max_iters') if k != length_key and k in train]
    if other or length_key not in train:
        found = f'train_cfg.{other[0]} is set, but ' if other else ''
        raise ConfigError(f'{found}{kind} needs train_cfg.{length_key}; set '
                          f'train_cfg.{length_key}=N',
                          key=f'train_cfg.{other[0] if other else length_key}')
    out['_val'] = dict(interval=train.pop('val_interval', loop_defaults['val_interval']),
                       begin=train.pop('val_begin', loop_defaults['val_begin']))
    runner_type = {v: k for k, v in RUNNER_LOOP.items()}[kind]
    out['runner'] = dict(type=runner_type, **{length_key: train.pop(length_key)})
    report.exact('train_cfg', 'runner')
    for key in train:
        report.lossy(f'train_cfg.{key}', '(dropped)', 'mtrain runners have no such option')
    return loop_defaults['by_epoch'], out['runner'][length_key]


def _optim(src: Dict[str, Any], out: Dict[str, Any], report: ConversionReport,
           keep_rules: bool) -> None:
    wrapper = dict(src.pop('optim_wrapper', None) or {})
    if 'optimizer' in src:  # mmseg 1.x schedules: a variable that optim_wrapper reuses
        src.pop('optimizer')
        report.note('optimizer', '(dropped)', 'a top-level variable of the mmengine config '
                    '(mmseg 1.x schedules); optim_wrapper.optimizer is what mmengine reads')
    kind = wrapper.pop('type', 'OptimWrapper')
    optimizer = dict(wrapper.pop('optimizer', None) or {})
    for key in ('paramwise_cfg', 'constructor'):
        if key in wrapper:
            optimizer[key] = wrapper.pop(key)
    _constructor(optimizer, report, keep_rules)
    out['optimizer'] = optimizer
    report.exact('optim_wrapper.optimizer', 'optimizer')
    hook: Dict[str, Any] = {}
    if wrapper.get('accumulative_counts', 1) != 1:
        hook.update(type='GradientCumulativeOptimizerHook',
                    cumulative_iters=wrapper.pop('accumulative_counts'))
        report.exact('optim_wrapper.accumulative_counts', 'optimizer_config.cumulative_iters')
    wrapper.pop('accumulative_counts', None)
    clip = wrapper.pop('clip_grad', None)
    if clip is not None:
        clip = dict(clip)
        if clip.pop('type', 'norm') != 'norm':  # clip_value is no clip_grad_norm_ argument
            report.lossy('optim_wrapper.clip_grad', '(dropped)', 'mmcv 1.x (and mtrain) clip '
                         'gradients by norm only; clipping by value is left out')
        else:
            hook['grad_clip'] = clip
            if keep_rules:  # (training: mmengine clips its optimizer's parameters, see OptimizerHook)
                hook['clip_params'] = 'optimizer'
            report.exact('optim_wrapper.clip_grad', 'optimizer_config.grad_clip')
    out['optimizer_config'] = hook
    if kind == 'AmpOptimWrapper':
        out['fp16'] = dict(loss_scale=wrapper.pop('loss_scale', 'dynamic'))
        if 'dtype' in wrapper:
            out['fp16']['dtype'] = wrapper.pop('dtype')
        report.note('optim_wrapper.type', 'fp16', "AmpOptimWrapper's default loss scale is "
                    "'dynamic', Fp16OptimizerHook's a static 512: written out")
    elif kind != 'OptimWrapper':
        report.lossy('optim_wrapper.type', 'optimizer', f"'{kind}' has no mtrain counterpart")
    for key in wrapper:
        report.lossy(f'optim_wrapper.{key}', '(dropped)', 'no mtrain counterpart')


def _constructor(optimizer: Dict[str, Any], report: ConversionReport, keep_rules: bool) -> None:
    """mmengine's default constructor: mmcv's where the rules agree, else mtrain's copy of it.

    ``keep_rules`` (training): always mtrain's ``DefaultOptimWrapperConstructor``,
    mmengine's rules to the letter (frozen parameters left out, too).
    """
    name = optimizer.get('constructor', 'DefaultOptimWrapperConstructor')
    if name != 'DefaultOptimWrapperConstructor':
        report.note('optim_wrapper.constructor', 'optimizer.constructor', f"'{name}' must be "
                    "registered in mtrain's OPTIMIZER_CONSTRUCTORS (custom_imports)")
        return
    reasons = mmengine_differs(optimizer.get('paramwise_cfg') or {})
    if keep_rules or reasons:
        optimizer['constructor'] = 'DefaultOptimWrapperConstructor'
    else:
        optimizer.pop('constructor', None)  # mmcv's DefaultOptimizerConstructor: same values
    if reasons and not keep_rules:
        report.note('optim_wrapper.paramwise_cfg', "optimizer.constructor="
                    "'DefaultOptimWrapperConstructor'", "mmengine's rules differ from mmcv's "
                    'here (' + '; '.join(reasons) + "); mtrain's DefaultOptimWrapperConstructor "
                    'keeps them exactly (mmcv 1.7.2 itself has no such constructor)')


def _assemble_hooks(out: Dict[str, Any], scheduler_hooks: List[dict],
                    default_hooks: List[dict], user_hooks: Optional[List[dict]]) -> None:
    """The one place that writes ``custom_hooks``, after every section has been read.

    mmengine registers its default hooks before the custom ones, so at equal
    priority they come first here too. ``user_hooks`` None: the config had no
    ``custom_hooks`` key (then none is written unless a section needs one).
    """
    hooks = scheduler_hooks + default_hooks + list(user_hooks or [])
    if hooks or user_hooks is not None:
        out['custom_hooks'] = hooks
    assert all(h in out.get('custom_hooks', []) for h in scheduler_hooks), \
        '[to_mmcv] the ParamSchedulerHook was lost while assembling custom_hooks'


def _schedules(src: Dict[str, Any], out: Dict[str, Any], loop: sched.Loop,
               report: ConversionReport, keep: bool, stepped: bool) -> List[dict]:
    """``lr_config``/``momentum_config`` into ``out``; returns the hooks it needs (with
    ``keep``: the ParamSchedulerHook that runs mmengine's schedulers). ``stepped`` False:
    ``default_hooks.param_scheduler=None`` (see :mod:`.default_hooks`)."""
    schedulers = sched.per_parameter_lists(src.pop('param_scheduler', None), out, report)
    if keep:
        if not schedulers:
            return []
        report.exact('param_scheduler', "custom_hooks: ParamSchedulerHook (mmengine's "
                     'scheduler classes)' + ('' if stepped else ', built and never stepped, '
                                             'as default_hooks.param_scheduler=None'))
        hook = dict(type='ParamSchedulerHook', param_scheduler=copy.deepcopy(schedulers))
        return [hook if stepped else dict(hook, stepped=False)]
    if not stepped and schedulers:
        report.lossy('default_hooks.param_scheduler', '(dropped)', "mmengine never steps the "
                     "schedulers and trains at their step-0 values; the converted config has "
                     "no schedule and trains at the optimizer's values")
        return []
    lr, momentum = sched.split_schedulers(schedulers)
    lr_config = sched.lr_config(lr, loop, report, uniform_base_lr(out.get('optimizer')))
    momentum_config = sched.momentum_config(momentum, loop, report, out.get('optimizer'))
    if lr_config is not None:
        out['lr_config'] = lr_config
    if momentum_config is not None:
        out['momentum_config'] = momentum_config
    return []


def _evaluation(src: Dict[str, Any], out: Dict[str, Any], loop: sched.Loop,
                report: ConversionReport, training: bool) -> None:
    val = out.pop('_val')
    evaluator = src.pop('val_evaluator', None)
    src.pop('test_evaluator', None)
    if evaluator is None or 'val' not in out.get('data', {}):
        return
    metric = evaluator_to_metric(evaluator, report)
    evaluation: Dict[str, Any] = val_rule_to_mmcv(val['begin'], val['interval'], loop,
                                                  report, training)
    if metric is not None:
        evaluation['metric'] = metric if len(metric) > 1 else metric[0]
    if not loop[0]:
        evaluation['by_epoch'] = False
    out['evaluation'] = evaluation


def _custom_hooks(src: Dict[str, Any], report: ConversionReport) -> Optional[List[dict]]:
    """Passed through, but for mmengine's ``EMAHook``, whose arguments are not mmcv's
    (None: the config has no ``custom_hooks``)."""
    if 'custom_hooks' not in src:
        return None
    hooks = []
    for i, hook in enumerate(src.pop('custom_hooks') or []):
        if hook.get('type') == 'EMAHook':
            hook = ema_to_mmcv(hook, f'custom_hooks.{i}', report)
        if hook is not None:
            hooks.append(hook)
    report.exact('custom_hooks', 'custom_hooks')
    return hooks


def _hooks(slots: Dict[str, Any], src: Dict[str, Any], out: Dict[str, Any], loop: sched.Loop,
           report: ConversionReport) -> List[dict]:
    """``default_hooks`` (read by :func:`read_default_hooks`) → ``checkpoint_config``/
    ``log_config``; returns the other default hooks, which mtrain registers as custom hooks."""
    hooks = dict(slots)
    for name in ('timer', 'param_scheduler', 'sampler_seed', 'runtime_info'):
        hooks.pop(name, None)
    _checkpoint(hooks.pop('checkpoint', None), out, loop, report)
    logger = hooks.pop('logger', None)
    vis = dict(src.pop('visualizer', None) or {})
    processor = dict(src.pop('log_processor', None) or {})
    if logger is not None:
        text = dict(type='TextLoggerHook')
        if 'by_epoch' in processor:
            text['by_epoch'] = processor.pop('by_epoch')
        out['log_config'] = dict(interval=dict(logger).get('interval', MMENGINE_LOG_INTERVAL),
                                 hooks=[text] + _logger_hooks(vis, report))
        report.exact('default_hooks.logger', 'log_config')
    for key in processor:
        report.note(f'log_processor.{key}', '(dropped)', 'mtrain averages over the log '
                    'interval')
    extra = []
    for name, hook in hooks.items():
        if hook is None:
            continue
        if name == 'visualization':
            report.lossy('default_hooks.visualization', '(dropped)', 'mtrain has no '
                         'prediction visualisation hook')
            continue
        extra.append(dict(hook))
        report.note(f'default_hooks.{name}', 'custom_hooks', 'registered as a custom hook')
    return extra


#: mmengine ``CheckpointHook`` arguments mtrain's has no counterpart for, and why.
_ENGINE_ONLY_CHECKPOINT = {
    'save_begin': 'mtrain saves from the first interval on',
    'published_keys': 'mtrain publishes no stripped checkpoint copy',
    'greater_keys': "mtrain's save_best rule is 'greater' or 'less', not per-key lists",
    'less_keys': "mtrain's save_best rule is 'greater' or 'less', not per-key lists",
    'backend_args': 'mtrain writes to the local file system',
}


def _checkpoint(ckpt: Any, out: Dict[str, Any], loop: sched.Loop,
                report: ConversionReport) -> None:
    """mmengine's ``CheckpointHook`` (its own defaults: by epoch) → ``checkpoint_config``."""
    if ckpt is None:
        return
    ckpt = dict(ckpt)
    ckpt.pop('type', None)
    ckpt.setdefault('by_epoch', MMENGINE_CHECKPOINT['by_epoch'])  # mtrain's runner would differ
    given = {**MMENGINE_CHECKPOINT, **ckpt}
    if ckpt.pop('save_param_scheduler', True) is False:
        report.lossy('default_hooks.checkpoint.save_param_scheduler', '(dropped)', 'mtrain '
                     "always saves the schedulers' state with the checkpoint")
    for key in [k for k in _ENGINE_ONLY_CHECKPOINT if k in ckpt]:
        ckpt.pop(key)
        report.lossy(f'default_hooks.checkpoint.{key}', '(dropped)',
                     _ENGINE_ONLY_CHECKPOINT[key])
    for key in ('save_best', 'rule'):
        if key in ckpt and 'evaluation' in out:
            value = ckpt.pop(key)
            out['evaluation'][key] = save_best_key(value, 'mmcv') if key == 'save_best' and \
                isinstance(value, str) and value != 'auto' else value
        elif key in ckpt:
            report.lossy(f'default_hooks.checkpoint.{key}', '(dropped)', 'no val_evaluator: '
                         'there is no metric to choose the best checkpoint by')
            ckpt.pop(key)
    if ckpt['by_epoch'] and not loop[0]:  # the loop's one "epoch" ends with the run
        saves = given['interval'] == 1 or given['save_last']
        report.note('default_hooks.checkpoint', 'checkpoint_config', "mmengine's "
                    'CheckpointHook counts epochs (by_epoch=True by default); an iteration loop '
                    'has one epoch, ending with the run: ' + (
                        'one checkpoint at the end (mtrain names it iter_N.pth)' if saves
                        else 'no checkpoint'))
        if not saves:
            return
        ckpt.update(by_epoch=False, interval=-1, save_last=True)
    else:
        report.exact('default_hooks.checkpoint', 'checkpoint_config')
    out['checkpoint_config'] = ckpt


def _logger_hooks(vis: Dict[str, Any], report: ConversionReport) -> list:
    hooks = []
    for i, backend in enumerate(vis.get('vis_backends', None) or []):
        backend = dict(backend)
        kind = backend.pop('type')
        backend.pop('save_dir', None)
        if kind == 'LocalVisBackend':
            report.exact(f'visualizer.vis_backends.{i}', 'log_config.hooks: TextLoggerHook')
            continue
        if kind not in _BACKEND_HOOKS:
            report.lossy(f'visualizer.vis_backends.{i}', '(dropped)', f"'{kind}' has no "
                         'mtrain logger hook')
            continue
        hook = dict(type=_BACKEND_HOOKS[kind])
        for key in list(backend):
            if key in _BACKEND_ARGS.get(kind, ()):
                hook[key] = backend.pop(key)
        for key in backend:
            report.lossy(f'visualizer.vis_backends.{i}.{key}', '(dropped)',
                         f'{hook["type"]} takes no {key}')
        hooks.append(hook)
        report.exact(f'visualizer.vis_backends.{i}', f'log_config.hooks: {hook["type"]}')
    return hooks


def _environment(src: Dict[str, Any], out: Dict[str, Any], report: ConversionReport) -> None:
    randomness = dict(src.pop('randomness', None) or {})
    for key in ('seed', 'deterministic'):
        if key in randomness:
            out[key] = randomness.pop(key)
    for key in randomness:
        report.lossy(f'randomness.{key}', '(dropped)', 'mtrain seeds every rank alike')
    env = dict(src.pop('env_cfg', None) or {})
    if 'cudnn_benchmark' in env:
        out['cudnn_benchmark'] = env.pop('cudnn_benchmark')
    if 'dist_cfg' in env:
        out['dist_params'] = env.pop('dist_cfg')
    out.update(dict(env.pop('mp_cfg', None) or {}))
    for key in env:
        report.lossy(f'env_cfg.{key}', '(dropped)', 'no mtrain counterpart')
    load_from, resume = src.pop('load_from', None), src.pop('resume', False)
    if resume and load_from:
        out['resume_from'] = load_from
    elif resume:
        out['auto_resume'] = True
    elif load_from:
        out['load_from'] = load_from
    wrapper = src.pop('model_wrapper_cfg', None)
    if wrapper is not None:
        wrapper = dict(wrapper)
        if wrapper.pop('type', 'MMDistributedDataParallel') != 'MMDistributedDataParallel':
            report.lossy('model_wrapper_cfg.type', 'model_wrapper', 'only '
                         'MMDistributedDataParallel maps (onto MTDistributedDataParallel)')
        out['model_wrapper'] = dict(type='MTDistributedDataParallel', **wrapper)
    compile_cfg = src.pop('compile', None)
    if isinstance(compile_cfg, dict) and compile_cfg.get('target', 'train_step') != 'train_step':
        report.lossy('compile.target', 'compile', UNSUPPORTED['cfg.compile.target'])
    if isinstance(compile_cfg, dict):
        compile_cfg = {k: v for k, v in compile_cfg.items() if k != 'target'}
    if compile_cfg not in (None, False):
        out['compile'] = compile_cfg
