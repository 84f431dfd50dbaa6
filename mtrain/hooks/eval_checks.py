"""The ``evaluation`` config checked when the hook is built, before the first iteration.

A typo in ``metric`` or ``save_best``, or a val dataset without ``evaluate``,
would otherwise surface after a whole epoch of training. A dataset can declare
what it computes in a class attribute ``METRICS``: the names its ``evaluate``
accepts as ``metric`` and returns as keys (``*`` matches any text, as in
``fnmatch``)::

    class MyDataset(Dataset):
        METRICS = ('mAP', 'AP50', 'recall@*')

        def evaluate(self, results, metric='mAP', logger=None):
            ...

Without ``METRICS`` only the presence of ``evaluate`` and its arguments are
checked.
"""

import fnmatch
import inspect
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import torch

from torch.utils.data import DataLoader

from ..utils import ConfigError
from ..utils.errors import ConfigTypeError, closest_names


def check_loader(dataloader: Any, hook_cls: type) -> None:
    """One ``DataLoader``, else a ``TypeError`` (mmcv 1.7.2 checks it first), a list included."""
    if not isinstance(dataloader, DataLoader):
        hint = (' (a list: pass the one val loader itself, e.g. data_loaders[0])'
                if isinstance(dataloader, (list, tuple)) else '')
        raise ConfigTypeError(f'{hook_cls.__name__} evaluates one DataLoader, but got a '
                              f'{type(dataloader).__name__}{hint}.', key='evaluation')


def check_eval_config(dataloader: Any, eval_kwargs: Dict[str, Any], save_best: Optional[str],
                      hook_cls: type) -> None:
    """Raise :class:`ConfigError` naming the ``evaluation`` key that cannot work."""
    dataset = getattr(dataloader, 'dataset', None)
    evaluate = getattr(dataset, 'evaluate', None)
    name = type(dataset).__name__
    if not callable(evaluate):
        raise ConfigError(
            f'the val dataset {name} has no evaluate(results, logger=None, **kwargs) method, '
            'which `evaluation` needs to score the model. Give the dataset one that returns '
            '{metric name: value}, or set evaluation=None to train without evaluating.',
            key='evaluation')
    _check_arguments(evaluate, eval_kwargs, name, hook_cls)
    declared = getattr(dataset, 'METRICS', None)
    if declared is None:
        return
    metric = eval_kwargs.get('metric')
    requested = [] if metric is None else [metric] if isinstance(metric, str) else list(metric)
    for metric_name in requested:
        if not _matches(metric_name, declared):
            raise ConfigError(f"{name} computes no metric '{metric_name}'."
                              f'{_suggest(metric_name, declared)} Known: {_listed(declared)}.',
                              key='evaluation.metric')
    if save_best not in (None, 'auto') and save_best not in requested \
            and not _matches(save_best, declared):
        raise ConfigError(f"save_best='{save_best}' is not a metric {name} returns."
                          f'{_suggest(save_best, list(declared) + requested)} Known: '
                          f"{_listed(declared)}, or 'auto' (the first metric).",
                          key='evaluation.save_best')


def dataset_eval_kwargs(evaluation: Dict[str, Any], hook_classes: Sequence[type]) -> Dict[str, Any]:
    """The ``evaluation`` keys a hook passes on to ``dataset.evaluate`` (its ``**eval_kwargs``).

    A key that no class in ``hook_classes`` (nor its bases) names in its
    ``__init__`` goes to ``evaluate``, as when the hook is built in training;
    ``type`` picks the hook. ``tools/test.py`` scores a checkpoint with these,
    so ``topk``, ``iou_thr``... mean what they meant in the training run's
    evaluation (mmdet 2.x's ``test.py`` pops a fixed list of hook keys instead).
    """
    own = {'type'}
    for cls in {base for hook_cls in hook_classes for base in hook_cls.__mro__}:
        if '__init__' in vars(cls):
            own.update(name for name, p in inspect.signature(cls.__init__).parameters.items()
                       if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
    return {key: value for key, value in evaluation.items() if key not in own}


def _check_arguments(evaluate: Any, eval_kwargs: Dict[str, Any], dataset_name: str,
                     hook_cls: type) -> None:
    """Extra ``evaluation`` keys go to ``dataset.evaluate``: reject those it does not take."""
    params = inspect.signature(evaluate).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    known = list(inspect.signature(hook_cls).parameters) + list(params)
    for key in eval_kwargs:
        if key not in params:
            raise ConfigError(f"'{key}' is neither an {hook_cls.__name__} option nor an "
                              f'argument of {dataset_name}.evaluate.{_suggest(key, known)}',
                              key=f'evaluation.{key}')


def _matches(name: str, declared: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in declared)


def _suggest(name: str, candidates: Sequence[str]) -> str:
    """'Did you mean ...?' from the closest spellings, or the names ``name`` begins."""
    plain = list(dict.fromkeys(c for c in candidates
                               if '*' not in c and c not in ('kwargs', 'args')))
    hits: List[str] = closest_names(name, plain) or [
        c for c in plain if c.lower().startswith(name.lower())][:3]
    if not hits:
        return ''
    return ' Did you mean ' + ' or '.join(f"'{h}'" for h in hits) + '?'


def _listed(declared: Sequence[str]) -> str:
    return ', '.join(f"'{d}'" for d in declared)


def evaluate_kwargs(hook: Any, runner) -> Dict[str, Any]:
    """``eval_kwargs``, plus ``out_dir`` (the work dir) and ``tag`` for an ``evaluate`` that plots.

    ``out_dir``/``tag`` let a dataset write plots (a confusion matrix) per evaluation.
    """
    evaluate = hook.dataloader.dataset.evaluate
    if runner.work_dir is None or 'out_dir' not in inspect.signature(evaluate).parameters:
        return dict(hook.eval_kwargs)
    unit, number = ('epoch', runner.epoch + 1) if hook.by_epoch else ('iter', runner.iter + 1)
    return {'out_dir': runner.work_dir, 'tag': f'{unit}_{number}', **hook.eval_kwargs}


def check_eval_results(metrics: Any, dataset: Any) -> Dict[str, Any]:
    """``dataset.evaluate``'s result as ``{name: value}`` the loggers can write, or a ConfigError.

    The contract (mmcv 1.x): a dict of metric name to a number (or a text
    such as mmdet's ``bbox_mAP_copypaste``). A numpy scalar stays as it is
    (the json log writes it as mmcv's did: an ``np.float32`` unrounded); an
    array or tensor becomes a number (0-d, ``tensor(0.9)``) or a list (per-class
    values), which the text log can format. Anything else (a list instead of the
    dict) fails on the first evaluation, naming the method, instead of
    inside the logger after the epoch.
    """
    where = f'{type(dataset).__name__}.evaluate'
    if not isinstance(metrics, dict):
        shown = f' ({metrics[:2]!r}...)' if isinstance(metrics, (list, tuple)) else ''
        raise ConfigError(f'{where} returned a {type(metrics).__name__}{shown}; it must return '
                          "a dict of metric name -> number, e.g. {'accuracy': 0.93}",
                          key='data.val')
    return {name: _plain(name, value, where) for name, value in metrics.items()}


def eval_predictions(out: Any, model: Any) -> torch.Tensor:
    """``out['predictions']``: what mtrain's model contract returns in eval mode, one row a sample.

    A model that returns its losses when not training has no predictions to
    score; say so at the first val batch rather than with a ``KeyError``.
    """
    if isinstance(out, dict) and isinstance(out.get('predictions'), torch.Tensor):
        return out['predictions']
    name = type(getattr(model, 'module', model)).__name__
    got = sorted(out.get('log_vars', out)) if isinstance(out, dict) else type(out).__name__
    raise ConfigError(f'in eval mode {name} returned losses ({got}); evaluation needs the '
                      'predictions: return the scores (e.g. logits, one row per sample) when '
                      'not self.training (docs/your_own_model_and_data.md)', key='model')


def best_score(metrics: Dict[str, Any], key: str, save_best: str, dataset: Any) -> Any:
    """``metrics[key]``, the value ``save_best`` compares, or a ConfigError if it is no number.

    A list (per-class values, an array turned into a list) has no order with
    the best score so far: the comparison would be a ``TypeError`` after the
    evaluation, with the name of neither the dataset nor the key.
    """
    value = metrics[key]
    if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
        return value
    what = f'a list of {len(value)} values' if isinstance(value, list) else repr(value)[:40]
    chosen = f"save_best='{save_best}'" + (f" (the first metric, '{key}')"
                                          if save_best != key else '')
    raise ConfigError(f"{type(dataset).__name__}.evaluate returned '{key}' as {what}, but "
                      f'{chosen} keeps the checkpoint with the best single number; return one '
                      f"number for '{key}' (e.g. the mean) and the per-class values under "
                      'another name, or set save_best to a metric that is a number',
                      key='evaluation.save_best')


def _plain(name: Any, value: Any, where: str) -> Any:
    """A metric value as a Python number, text or list of numbers."""
    if isinstance(value, (bool, int, float, str, np.generic)):
        return value  # a numpy scalar as it is: the json log writes it as mmcv's did (unrounded)
    if hasattr(value, 'shape') and hasattr(value, 'tolist'):  # numpy or torch
        return value.tolist()  # a 0-d value gives a number, a longer one a list
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, float)) for v in value):
        return list(value)
    raise ConfigError(f"{where} returned '{name}' as a {type(value).__name__} ({value!r:.60}); "
                      'each metric must be a number, a text or a list of numbers',
                      key='data.val')
