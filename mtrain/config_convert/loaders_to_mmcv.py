"""mmengine's ``train/val/test_dataloader`` → mmcv 1.x's ``data`` (mtrain's loaders)."""

from typing import Any, Dict

from .report import ConversionReport


def loaders_to_mmcv(src: Dict[str, Any], out: Dict[str, Any], report: ConversionReport) -> None:
    """``<split>_dataloader`` → ``data`` (mmcv 1.x's loader keys, per split where they differ)."""
    data: Dict[str, Any] = {}
    for split in ('train', 'val', 'test'):
        loader = src.pop(f'{split}_dataloader', None)
        if loader is None:
            continue
        loader = dict(loader)
        args = dict(samples_per_gpu=loader.pop('batch_size', 1),
                    workers_per_gpu=loader.pop('num_workers', 0))
        for key in ('persistent_workers', 'pin_memory', 'prefetch_factor', 'drop_last'):
            if key in loader:
                args[key] = loader.pop(key)
        sampler = dict(loader.pop('sampler', None) or {})
        if sampler.get('shuffle', split == 'train') != (split == 'train'):
            args['shuffle'] = sampler.get('shuffle')
        if sampler.get('type', 'DefaultSampler') not in ('DefaultSampler', 'InfiniteSampler'):
            report.lossy(f'{split}_dataloader.sampler', '(dropped)', 'mtrain samples with its '
                         'own distributed sampler (DefaultSampler semantics)')
        elif sampler.get('seed') is not None:
            _sampler_seed(split, sampler, src, out, report)
        data[split] = loader.pop('dataset')
        if split == 'train':
            data.update(args)
        else:
            extra = {k: v for k, v in args.items() if data.get(k) != v}
            if extra:
                data[f'{split}_dataloader'] = extra
        for key in loader:
            report.lossy(f'{split}_dataloader.{key}', '(dropped)', 'mtrain builds its '
                         'loaders with its own collate and sampler')
        report.exact(f'{split}_dataloader', f'data.{split}')
    if data:
        out['data'] = data


def _sampler_seed(split: str, sampler: Dict[str, Any], src: Dict[str, Any],
                  out: Dict[str, Any], report: ConversionReport) -> None:
    """``sampler.seed``: mtrain's train sampler is seeded by the run's seed.

    Both orders are ``randperm(n)`` seeded with ``seed + epoch`` (mmengine's
    ``DefaultSampler``, torch's ``DistributedSampler``), so the seed carries over as
    the run's ``seed`` when ``randomness.seed`` is unset or equal. Only then: the
    run's seed also seeds the model's initialisation, which mmengine draws apart.
    """
    key, seed = f'{split}_dataloader.sampler.seed', sampler['seed']
    if split != 'train' or not sampler.get('shuffle', True):
        report.note(key, '(dropped)', 'a loader that does not shuffle: no order to seed')
        return
    run_seed = (src.get('randomness') or {}).get('seed')
    if run_seed is not None and run_seed != seed:
        report.lossy(key, '(dropped)', f"mtrain seeds the train sampler with the run's seed "
                     f'(randomness.seed={run_seed}), not {seed}: another order of samples; '
                     'set both to one value')
        return
    if run_seed is not None:
        report.exact(key, 'seed')
        return
    out['seed'] = seed
    report.note(key, 'seed', "the run's seed, which seeds mtrain's train sampler (a --seed "
                'on the command line overrides it)')
