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
from ..datasets import build_dataloader
from ..hooks import DistSamplerSeedHook, EvalHook
from ..optim import build_optimizer
from ..registry import (BATCH_PROCESSORS, DATASETS, HOOKS, MODEL_WRAPPERS, MODELS, RUNNERS,
                        build)
from ..utils import ConfigError, get_dist_info
from .base_runner import BaseRunner
from .checkpoint import find_latest_valid


def build_runner(cfg: Config, work_dir: str, logger, *, seed: Optional[int] = None,
                 distributed: bool = False, validate: bool = True,
                 trust_checkpoint: bool = False) -> Tuple[BaseRunner, List[Any], List]:
    """Build the runner described by ``cfg`` and the loaders its workflow needs.

    Returns:
        ``(runner, data_loaders, workflow)``, ready for ``runner.run(data_loaders, workflow)``.
    """
    device = _device(cfg)
    model = build(cfg.model, MODELS, 'model').to(device)
    model = _wrap(model, cfg, distributed)
    optimizer = build_optimizer(model, _required(cfg, 'optimizer'))
    workflow = _workflow(cfg)
    data_loaders = [_loader(cfg, 'train' if mode == 'train' else 'val', seed) for mode, _ in workflow]
    processor = build(cfg.get('batch_processor', dict(type='BasicBatchProcessor')),
                      BATCH_PROCESSORS, 'batch_processor')
    runner = build(_runner_cfg(cfg), RUNNERS, 'runner', default_args=dict(
        model=model, optimizer=optimizer, batch_processor=processor, work_dir=work_dir,
        logger=logger, meta=_meta(cfg, seed)))
    runner.register_training_hooks(
        lr_config=cfg.get('lr_config'), optimizer_config=cfg.get('optimizer_config', {}),
        checkpoint_config=cfg.get('checkpoint_config'), log_config=cfg.get('log_config'),
        momentum_config=cfg.get('momentum_config'), custom_hooks_config=cfg.get('custom_hooks'))
    runner.register_hook(DistSamplerSeedHook())
    if cfg.get('nan_policy', {}) is not None:
        nan_policy = dict(cfg.get('nan_policy', {}))
        nan_policy.setdefault('interval', (cfg.get('log_config') or {}).get('interval', 50))
        runner.register_hook(build(dict(type='NanGuardHook', **nan_policy), HOOKS, 'nan_policy'))
    if validate and cfg.get('evaluation') is not None and cfg.data.get('val') is not None:
        runner.register_hook(_eval_hook(cfg, seed), 'LOW')
    _resume_or_load(runner, cfg, trust_checkpoint)
    return runner, data_loaders, workflow


def build_dataset(cfg: Config, split: str) -> Any:
    """``data.<split>`` built from the DATASETS registry."""
    data = _required(cfg, 'data')
    if data.get(split) is None:
        raise ConfigError(f'the config has no data.{split}; add data.{split}=dict(type=...)',
                          key=f'data.{split}')
    return build(data[split], DATASETS, f'data.{split}')


def _loader(cfg: Config, split: str, seed: Optional[int]) -> Any:
    """mmcv/mmdet-2.x loader args: ``data.samples_per_gpu`` etc., then ``data.<split>_dataloader``."""
    data = cfg.data
    args: Dict[str, Any] = {k: v for k, v in data.items() if k not in (
        'train', 'val', 'test', 'train_dataloader', 'val_dataloader', 'test_dataloader')}
    args.setdefault('samples_per_gpu', 1)
    args.setdefault('workers_per_gpu', 0)
    args['shuffle'] = split == 'train' and args.get('shuffle', True)
    args.update(data.get(f'{split}_dataloader', {}))
    try:
        return build_dataloader(build_dataset(cfg, split), seed=seed, **args)
    except (TypeError, ValueError) as e:
        raise ConfigError(str(e), key=f'data.{split}_dataloader') from e


def build_test_loader(cfg: Config, seed: Optional[int] = None) -> Any:
    """The loader ``tools/test.py`` evaluates (``data.test``)."""
    return _loader(cfg, 'test', seed)


def _eval_hook(cfg: Config, seed: Optional[int]) -> EvalHook:
    eval_cfg = dict(copy.deepcopy(cfg.evaluation))
    eval_cfg.setdefault('by_epoch', _runner_cfg(cfg)['type'] != 'IterBasedRunner')
    return build(dict(type='EvalHook', **eval_cfg), HOOKS, 'evaluation',
                 default_args=dict(dataloader=_loader(cfg, 'val', seed)))


def _workflow(cfg: Config) -> List[Tuple[str, int]]:
    workflow = [tuple(flow) for flow in cfg.get('workflow', [('train', 1)])]
    for flow in workflow:
        if len(flow) != 2 or flow[0] not in ('train', 'val') or not isinstance(flow[1], int) \
                or flow[1] <= 0:
            raise ConfigError(f"each workflow phase is ('train', N) or ('val', N) with N > 0, "
                              f'got {flow!r}', key='workflow')
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
        if cfg.get('find_unused_parameters') is not None:
            wrapper.setdefault('find_unused_parameters', cfg.find_unused_parameters)
    else:
        wrapper = dict(type='ModelWrapper')  # DDP options mean nothing in one process
    return build(wrapper, MODEL_WRAPPERS, 'model_wrapper', default_args=dict(module=model))


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


def _required(cfg: Config, key: str) -> Any:
    if cfg.get(key) is None:
        raise ConfigError(f'the config has no `{key}`; every training config needs one', key=key)
    return cfg[key]
