"""Evaluation across generations: mmcv's ``evaluation.metric`` ↔ mmengine's ``val_evaluator``.

mmcv 1.x evaluates with the dataset's own ``evaluate(results, metric=...)``
(mtrain keeps that contract); mmengine with a metric class named by
``val_evaluator``. The OpenMMLab metric classes of the mmengine era name the
1.x metric in one argument (``VOCMetric(metric='mAP')``,
``CocoMetric(metric='bbox')``, ``IoUMetric(iou_metrics=['mIoU'])``), so that
argument carries the metric across; anything the conversion cannot carry is
reported with the reason, never replaced by a metric the dataset lacks.
"""

import inspect
from typing import Any, Dict, List, Optional, Tuple

from mmengine.registry import METRICS

from .report import ConversionReport
from .table import EVALUATOR_OF_METRIC, METRIC_ARGUMENT

#: Keys of a metric class that say how, not what (mmengine's BaseMetric).
_BASE_METRIC_KEYS = ('type', 'prefix', 'collect_device', 'collect_dir')
#: Argument names a metric class uses for the 1.x metric name(s), in the order tried.
_NAME_ARGUMENTS = ('metric', 'metrics', 'iou_metrics')
_EMPTY = inspect.Parameter.empty


def registered_metric(kind: str) -> Optional[type]:
    """The class registered as ``kind`` in mmengine's ``METRICS`` here (None: not here)."""
    try:
        return METRICS.get(kind)
    except Exception:  # mmengine raises for a scoped name whose package is missing
        return None


def metric_argument(kind: str) -> Tuple[Optional[str], Any]:
    """``(argument naming the 1.x metric, its default)`` of the metric class ``kind``.

    The known classes come from :data:`METRIC_ARGUMENT`; a class registered here
    is read from its signature (``None``: it takes no metric name); a class not
    registered here (its package not imported) is assumed to use ``metric``.
    """
    cls = registered_metric(kind)
    if kind in METRIC_ARGUMENT or cls is None:
        return METRIC_ARGUMENT.get(kind, 'metric'), _EMPTY
    params = inspect.signature(cls.__init__).parameters
    for name in _NAME_ARGUMENTS:
        if name in params:
            return name, params[name].default
    return None, _EMPTY


def evaluator_to_metric(evaluator: Any, report: ConversionReport) -> Optional[List[str]]:
    """The ``evaluation.metric`` names for a ``val_evaluator`` (None: the dataset's default)."""
    items = evaluator if isinstance(evaluator, (list, tuple)) else [evaluator]
    metrics: List[str] = []
    for i, item in enumerate(items):
        key = 'val_evaluator' if len(items) == 1 else f'val_evaluator.{i}'
        item = dict(item or {})
        kind = item.get('type', '(no type)')
        if kind == 'Accuracy':
            topk = item.get('topk', (1, ))
            topk = (topk, ) if isinstance(topk, int) else tuple(topk)
            metrics += ['accuracy'] + (['accuracy_top5'] if 5 in topk else [])
            _drop_rest(item, ('topk', ), key, report)
            report.exact(key, 'evaluation.metric')
            continue
        value = _metric_names(kind, item, key, report)
        if value is None:
            continue
        metrics += [value] if isinstance(value, str) else list(value)
    return metrics or None


def _metric_names(kind: str, item: Dict[str, Any], key: str,
                  report: ConversionReport) -> Any:
    """The metric name(s) ``item`` computes, reported; None (reported lossy) if it names none."""
    arg, default = metric_argument(kind)
    value = item.get(arg, default) if arg is not None else _EMPTY
    if value is _EMPTY or value is None:
        where = (f"takes no metric name (its arguments: {', '.join(_arguments(kind))})"
                 if arg is None else f"has no '{arg}' argument set"
                 + ('' if registered_metric(kind) else ' (not registered here)'))
        report.lossy(key, '(dropped)', f"{kind} names no 1.x metric: it {where}; "
                     "mtrain evaluates with the dataset's evaluate(results, metric=...): "
                     'set evaluation.metric to a name your dataset computes')
        return None
    report.note(key, 'evaluation.metric', f"{kind}({arg}={value!r}"
                + (', its default' if arg not in item else '') + f") → metric={value!r} for "
                "the dataset's own evaluate(), as mmcv 1.x evaluated")
    _drop_rest(item, (arg, ), key, report)
    return value


def _arguments(kind: str) -> List[str]:
    params = inspect.signature(registered_metric(kind).__init__).parameters
    return [n for n in params if n not in ('self', 'args', 'kwargs') + _BASE_METRIC_KEYS]


def _drop_rest(item: Dict[str, Any], used: Tuple[str, ...], key: str,
               report: ConversionReport) -> None:
    for name in item:
        if name not in used and name not in _BASE_METRIC_KEYS:
            report.lossy(f'{key}.{name}', '(dropped)', f"an argument of {item['type']}; a 1.x "
                         "dataset's evaluate() takes its own arguments (add them to "
                         '`evaluation`, which passes them on)')


def metric_to_evaluator(metric: Any, report: ConversionReport,
                        metric_classes: Optional[Dict[str, str]] = None) -> Optional[Any]:
    """The ``val_evaluator`` for ``evaluation.metric`` (None: no metric class computes it).

    ``metric_classes`` maps a 1.x metric name to the metric class (registered in
    mmengine's ``METRICS``) that computes it, ahead of :data:`EVALUATOR_OF_METRIC`:
    ``{'mAP': 'MyBoxAP'}``; ``tools/convert_config.py --metric-class mAP=MyBoxAP``.
    """
    names = [metric] if isinstance(metric, str) else list(metric)
    evaluators: List[Dict[str, Any]] = []
    for name in names:
        found = _metric_class(name, dict(metric_classes or {}), report)
        if found is None:
            continue
        kind, arg, value = found
        same = [e for e in evaluators if e['type'] == kind]
        if same:  # one class for several names: mmengine lists them in its argument
            listed = same[0][arg] if isinstance(same[0][arg], list) else [same[0][arg]]
            same[0][arg] = sorted(set(listed) | {value}) if arg == 'topk' else listed + [value]
        else:
            evaluators.append({'type': kind, arg: [value] if arg not in (
                'metric', 'metrics') else value})
    for e in evaluators:
        if e['type'] == 'Accuracy':
            e['topk'] = tuple(e['topk'])
        elif registered_metric(e['type']) is None:
            report.note('evaluation.metric', f"val_evaluator: {e['type']}", f"{e['type']} is "
                        "not registered in mmengine's METRICS here (mmdet 3.x / mmseg 1.x "
                        'class): set default_scope and its other arguments (ann_file, ...)')
    if not evaluators:
        return None
    return evaluators[0] if len(evaluators) == 1 else evaluators


def _metric_class(name: str, metric_classes: Dict[str, str],
                  report: ConversionReport) -> Optional[Tuple[str, str, Any]]:
    """``(class, argument, value)`` computing the 1.x metric ``name``; None: reported lossy."""
    if name in metric_classes:
        kind = metric_classes[name]
        arg, _ = metric_argument(kind)
        if arg is None:
            report.lossy('evaluation.metric', f'val_evaluator: {kind}', f"{kind} takes no "
                         f"metric name (its arguments: {', '.join(_arguments(kind))}), so "
                         f"'{name}' cannot be asked of it")
            return None
        report.exact(f'evaluation.metric={name!r}', f'val_evaluator: {kind}({arg}={name!r})')
        return kind, arg, name
    if name not in EVALUATOR_OF_METRIC:
        report.lossy('evaluation.metric', '(dropped)', f"'{name}' is computed by the "
                     "dataset's own evaluate(); mmengine evaluates with a metric class "
                     f'(known: {", ".join(sorted(EVALUATOR_OF_METRIC))}); name the '
                     f'registered class that computes it (--metric-class {name}=TYPE) or '
                     'write val_evaluator=dict(type=...)')
        return None
    return EVALUATOR_OF_METRIC[name]


def save_best_key(name: str, to: str, evaluator: Any = None) -> str:
    """``save_best``'s metric name in the other framework (``accuracy/top1`` ↔ ``accuracy``).

    To mmengine, a metric class registered here prefixes the name with its
    ``prefix`` argument or ``default_prefix`` (``toy_det/mAP``), as its results are keyed.
    """
    if to == 'mmcv':
        return 'accuracy' if name == 'accuracy/top1' else name.split('/')[-1]
    if name == 'accuracy':
        return 'accuracy/top1'
    first = evaluator[0] if isinstance(evaluator, list) else evaluator
    if isinstance(first, dict) and '/' not in name:
        cls = registered_metric(first.get('type', ''))
        prefix = first.get('prefix') or getattr(cls, 'default_prefix', None)
        if prefix:
            return f'{prefix}/{name}'
    return name
