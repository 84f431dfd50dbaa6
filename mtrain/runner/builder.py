"""The one assembly function: a config in, a ready runner out.

Reads top to bottom like a training script: model → wrapper → optimizer →
data → batch processor → runner → hooks → resume. Nowhere else in mtrain
turns config dicts into objects (``registry.build`` does the lookups).
"""

import copy
import os.path as osp
import platform
from typing import Any, Dict, List, Optional, Tuple

import torch
from mmengine.config import Config

from .. import __version__
from ..config_checks import val_phase_dataset
from ..defaults import fill_runner_defaults
from ..datasets import build_dataloader
from ..hooks import DistSamplerSeedHook, EvalHook
from ..hooks.evaluation import DIST_ONLY_KEYS
from ..models.activation_checkpointing import apply_activation_checkpointing
from ..optim import build_optimizer, keep_groups_per_parameter
from ..registry import (BATCH_PROCESSORS, DATASETS, HOOKS, MODEL_WRAPPERS, MODELS, RUNNERS,
                        TRANSFORMS, build)
from ..utils import ConfigError, get_dist_info
from ..utils.errors import did_you_mean
from .base_runner import BaseRunner
from .checkpoint import find_latest_valid
from .epoch_based_runner import check_workflow
from .preflight import Preflight, run_preflight


def build_runner(cfg: Config, work_dir: str, logger, *, seed: Optional[int] = None,
                 distributed: bool = False, validate: bool = True,
                 trust_checkpoint: bool = False) -> Tuple[BaseRunner, List[Any], List]:
    """Build the runner described by ``cfg`` and the loaders its workflow needs.

    Returns:
        ``(runner, data_loaders, workflow)``, ready for ``runner.run(data_loaders, workflow)``.
    """
    device = _device(cfg)
    model = build(cfg.model, MODELS, 'model').to(device)
    apply_activation_checkpointing(model, cfg.get('activation_checkpointing'), logger)
    _compile(model, cfg.get('compile'))
    model = _wrap(model, cfg, distributed)
    optimizer = build_optimizer(model, _optimizer_cfg(cfg, logger))
    if isinstance(optimizer, dict) and cfg.get('optimizer_config', {}) is not None:
        raise ConfigError("a dict of optimizers is stepped by the model's own train_step; set "
                          'optimizer_config=None', key='optimizer_config')
    workflow = _workflow(cfg)
    data_loaders = [_loader(cfg, 'train', seed) if mode == 'train' else
                    _val_phase_loader(cfg, seed, logger) for mode, _ in workflow]
    processor = _batch_processor(cfg)
    runner = build(_runner_cfg(cfg), RUNNERS, 'runner', default_args=dict(
        model=model, optimizer=optimizer, batch_processor=processor, work_dir=work_dir,
        logger=logger, meta=_meta(cfg, seed)))
    runner.register_training_hooks(
        lr_config=cfg.get('lr_config'), optimizer_config=_optimizer_hook_cfg(cfg),
        checkpoint_config=cfg.get('checkpoint_config'), log_config=cfg.get('log_config'),
        momentum_config=cfg.get('momentum_config'), custom_hooks_config=cfg.get('custom_hooks'))
    runner.register_hook(DistSamplerSeedHook())
    if cfg.get('nan_policy', {}) is not None:
        nan_policy = dict(cfg.get('nan_policy', {}))
        nan_policy.setdefault('interval', (cfg.get('log_config') or {}).get('interval', 50))
        runner.register_hook(build(dict(type='NanGuardHook', **nan_policy), HOOKS, 'nan_policy'))
    datasets = {mode: loader.dataset for (mode, _), loader in zip(workflow, data_loaders)}
    if validate and cfg.get('evaluation') is not None and cfg.data.get('val') is not None:
        eval_hook = _eval_hook(cfg, seed)
        runner.register_hook(eval_hook, 'LOW')
        datasets.setdefault('val', getattr(eval_hook.dataloader, 'dataset', None))
    train_loader = data_loaders[[mode for mode, _ in workflow].index('train')]
    run_preflight(Preflight(runner, {k: v for k, v in datasets.items() if v is not None},
                            dict(cfg.model), _runner_cfg(cfg), _length(train_loader),
                            train_loader, workflow))
    _resume_or_load(runner, cfg, trust_checkpoint)
    return runner, data_loaders, workflow


def build_dataset(cfg: Config, split: str) -> Any:
    """``data.<split>`` built from the DATASETS registry."""
    data = _required(cfg, 'data')
    if data.get(split) is None:
        raise ConfigError(f'the config has no data.{split}; add data.{split}=dict(type=...)',
                          key=f'data.{split}')
    return build(data[split], DATASETS, f'data.{split}')


def _loader(cfg: Config, split: str, seed: Optional[int], dataset: Any = None) -> Any:
    """mmcv/mmdet-2.x loader args: ``data.samples_per_gpu`` etc., then ``data.<split>_dataloader``."""
    data = cfg.data
    args: Dict[str, Any] = {k: v for k, v in data.items() if k not in (
        'train', 'val', 'test', 'train_dataloader', 'val_dataloader', 'test_dataloader')}
    args.setdefault('samples_per_gpu', 1)
    args.setdefault('workers_per_gpu', 0)
    args['shuffle'] = split == 'train' and args.get('shuffle', True)
    args.update(data.get(f'{split}_dataloader', {}))
    try:
        return build_dataloader(build_dataset(cfg, split) if dataset is None else dataset,
                                seed=seed, **args)
    except ConfigError:
        raise  # already names its key (data.<split>.<arg>)
    except (TypeError, ValueError) as e:
        raise ConfigError(str(e), key=f'data.{split}_dataloader') from e


def _val_phase_loader(cfg: Config, seed: Optional[int], logger) -> Any:
    """The loader of a ``('val', N)`` workflow phase: ``data.val`` with the train pipeline.

    mmdet 2.x's rule (:func:`~mtrain.config_checks.val_phase_dataset`); said once at start-up.
    """
    dataset_cfg = val_phase_dataset(_required(cfg, 'data'))
    if dataset_cfg is None:
        raise ConfigError("the workflow has a ('val', N) phase but the config has no data.val",
                          key='data.val')
    same = dataset_cfg.get('pipeline') == cfg.data.val.get('pipeline')
    logger.info("workflow phase ('val', N) computes the losses on data.val, read with "
                + ('its own pipeline' if same else "data.train's pipeline (as mmdet 2.x did)")
                + '; the metrics come from `evaluation`')
    return _loader(cfg, 'val', seed, build(dataset_cfg, DATASETS, 'data.val'))


def build_test_loader(cfg: Config, seed: Optional[int] = None) -> Any:
    """The loader ``tools/test.py`` evaluates (``data.test``)."""
    return _loader(cfg, 'test', seed)


def _eval_hook(cfg: Config, seed: Optional[int]) -> EvalHook:
    """DistEvalHook in a distributed run, else EvalHook without DistEvalHook's own keys."""
    runner_type = _runner_cfg(cfg)['type']
    runner_cls = RUNNERS.get(runner_type) if isinstance(runner_type, str) else runner_type
    eval_cfg = fill_runner_defaults(runner_cls or runner_type,
                                    dict(evaluation=dict(copy.deepcopy(cfg.evaluation))))
    eval_cfg = eval_cfg['evaluation']  # by_epoch from the runner type, as mmdet 2.x's
    if get_dist_info()[1] > 1:
        eval_cfg.setdefault('type', 'DistEvalHook')
    else:
        for key in DIST_ONLY_KEYS:  # one config runs on 1 and on N processes
            eval_cfg.pop(key, None)
    eval_cfg.setdefault('type', 'EvalHook')
    return build(eval_cfg, HOOKS, 'evaluation',
                 default_args=dict(dataloader=_loader(cfg, 'val', seed)))


def _batch_processor(cfg: Config) -> Any:
    """``batch_processor`` (default: BasicBatchProcessor), its transforms built from TRANSFORMS."""
    proc = dict(cfg.get('batch_processor') or dict(type='BasicBatchProcessor'))
    if cfg.get('channels_last') is not None:  # the top-level switch, for the processor
        proc.setdefault('channels_last', cfg.channels_last)
    if proc.get('batch_transforms'):
        proc['batch_transforms'] = [
            build(t, TRANSFORMS, f'batch_processor.batch_transforms.{i}') if isinstance(t, dict)
            else t for i, t in enumerate(proc['batch_transforms'])]
    return build(proc, BATCH_PROCESSORS, 'batch_processor')


# The mixed-precision version of each optimizer hook (mmcv 1.x's `fp16` key).
_FP16_HOOKS = {'OptimizerHook': 'Fp16OptimizerHook', 'Fp16OptimizerHook': 'Fp16OptimizerHook',
               'GradientCumulativeOptimizerHook': 'GradientCumulativeFp16OptimizerHook',
               'GradientCumulativeFp16OptimizerHook': 'GradientCumulativeFp16OptimizerHook'}


def _optimizer_hook_cfg(cfg: Config) -> Any:
    """``optimizer_config``, made mixed-precision when ``fp16 = dict(...)`` is set.

    ``fp16 = dict(loss_scale=512.)`` (or ``dtype='bfloat16'``) turns
    OptimizerHook into Fp16OptimizerHook and GradientCumulativeOptimizerHook
    into GradientCumulativeFp16OptimizerHook, with the fp16 keys as arguments.
    """
    optimizer_config = cfg.get('optimizer_config', {})
    fp16 = cfg.get('fp16')
    if fp16 is None:
        return optimizer_config
    if not isinstance(fp16, dict):
        raise ConfigError(f"fp16 must be a dict such as dict(loss_scale='dynamic'), or None "
                          f'for full precision; got {fp16!r}', key='fp16')
    hook_cfg = dict(optimizer_config or {})
    hook_type = hook_cfg.pop('type', 'OptimizerHook')
    if hook_type not in _FP16_HOOKS:
        raise ConfigError(f"fp16 is set but optimizer_config.type is '{hook_type}', which has no "
                          'mixed-precision version; use OptimizerHook or '
                          'GradientCumulativeOptimizerHook, or set fp16=None',
                          key='optimizer_config.type')
    both = sorted(set(hook_cfg) & set(fp16))
    if both:
        raise ConfigError(f'{both} given in both fp16 and optimizer_config; keep one', key='fp16')
    return dict(type=_FP16_HOOKS[hook_type], **hook_cfg, **fp16)


def _workflow(cfg: Config) -> List[Tuple[str, int]]:
    workflow = [tuple(flow) for flow in cfg.get('workflow', [('train', 1)])]
    try:
        check_workflow(workflow)
    except ValueError as e:
        raise ConfigError(str(e), key='workflow') from e
    if not any(mode == 'train' for mode, _ in workflow):
        raise ConfigError("the workflow has no ('train', N) phase", key='workflow')
    return workflow


def _runner_cfg(cfg: Config) -> Dict[str, Any]:
    """``runner``, or mmcv's legacy ``total_epochs`` → EpochBasedRunner."""
    if cfg.get('runner') is not None:
        runner = dict(cfg.runner)
        runner.setdefault('type', 'EpochBasedRunner')
        return runner
    if cfg.get('total_epochs') is not None:
        return dict(type='EpochBasedRunner', max_epochs=cfg.total_epochs)
    raise ConfigError("no runner: add runner=dict(type='EpochBasedRunner', max_epochs=N) or "
                      "runner=dict(type='IterBasedRunner', max_iters=N)", key='runner')


def _wrap(model: torch.nn.Module, cfg: Config, distributed: bool) -> torch.nn.Module:
    wrapper = dict(cfg.get('model_wrapper') or {})
    if distributed:
        wrapper.setdefault('type', 'MTDistributedDataParallel')
        for key in ('find_unused_parameters', 'sync_bn'):  # top-level keys, as in mmdet 2.x
            if cfg.get(key) is not None:
                wrapper.setdefault(key, cfg[key])
    else:
        wrapper = dict(type='ModelWrapper')  # DDP options mean nothing in one process
    return build(wrapper, MODEL_WRAPPERS, 'model_wrapper', default_args=dict(module=model))


_COMPILE_KEYS = ('fullgraph', 'dynamic', 'backend', 'mode', 'options', 'disable')


def _compile(model: torch.nn.Module, compile_cfg: Any) -> None:
    """``compile = dict(mode='max-autotune')`` (``torch.compile``'s arguments) or ``True``.

    ``nn.Module.compile`` compiles the forward in place, so parameter names, the
    optimizer's parameters and the checkpoint keys stay those of the plain model.
    """
    if compile_cfg is None or compile_cfg is False:
        return
    if compile_cfg is True:
        compile_cfg = {}
    if not isinstance(compile_cfg, dict):
        raise ConfigError(f"compile must be True, None or a dict of torch.compile arguments "
                          f"such as dict(mode='max-autotune'); got {compile_cfg!r}", key='compile')
    for name in compile_cfg:
        if name not in _COMPILE_KEYS:
            raise ConfigError(f"torch.compile has no argument '{name}'."
                              f"{did_you_mean(name, _COMPILE_KEYS)} Accepted: "
                              f"{', '.join(_COMPILE_KEYS)}.", key=f'compile.{name}')
    model.compile(**compile_cfg)


def _device(cfg: Config) -> torch.device:
    name = cfg.get('device')
    if name is None:
        if torch.cuda.is_available():
            return torch.device('cuda', torch.cuda.current_device())
        return torch.device('cpu')
    if str(name).startswith('cuda') and not torch.cuda.is_available():
        raise ConfigError(f"device='{name}' but CUDA is not available here; use device='cpu' "
                          'or remove the key', key='device')
    return torch.device(name)


def _meta(cfg: Config, seed: Optional[int]) -> Dict[str, Any]:
    return {
        'env_info': f'Python {platform.python_version()}, torch {torch.__version__}, '
                    f'mtrain {__version__}, world size {get_dist_info()[1]}',
        'config': cfg.pretty_text if cfg.filename else str(cfg.to_dict()),
        'seed': seed,
        'exp_name': osp.basename(cfg.filename) if cfg.filename else None,
    }


def _resume_or_load(runner: BaseRunner, cfg: Config, trusted: bool) -> None:
    resume_from = cfg.get('resume_from')
    if resume_from is None and cfg.get('auto_resume'):
        resume_from = find_latest_valid(runner.work_dir, runner.logger)
        if resume_from is None:
            runner.logger.info(f'auto-resume: no valid checkpoint in {runner.work_dir}; '
                               'starting from scratch')
    if resume_from is not None:
        runner.resume(resume_from, trusted=trusted)
    elif cfg.get('load_from') is not None:
        runner.load_checkpoint(cfg.load_from, trusted=trusted)


def _length(loader: Any) -> Optional[int]:
    try:
        return len(loader)
    except TypeError:  # an iterable-style dataset
        return None


def _optimizer_cfg(cfg: Config, logger) -> Any:
    """``cfg.optimizer``, with its groups kept per parameter where a schedule lists per group
    (:func:`~mtrain.optim.keep_groups_per_parameter` decides, and says why)."""
    optimizer, reason = keep_groups_per_parameter(
        _required(cfg, 'optimizer'), {k: cfg.get(k) for k in ('lr_config', 'momentum_config')})
    if reason is not None:
        logger.info(reason)
    return optimizer


def _required(cfg: Config, key: str) -> Any:
    if cfg.get(key) is None:
        raise ConfigError(f'the config has no `{key}`; every training config needs one', key=key)
    return cfg[key]
