"""Evaluation across generations: mmcv's ``evaluation.metric`` ↔ mmengine's ``val_evaluator``.

mmcv 1.x evaluates with the dataset's own ``evaluate(results, metric=...)``
(mtrain keeps that contract); mmengine with a metric class named by
``val_evaluator``. The OpenMMLab metric classes of the mmengine era name the
1.x metric in one argument (``VOCMetric(metric='mAP')``,
``CocoMetric(metric='bbox')``, ``IoUMetric(iou_metrics=['mIoU'])``), so that
argument carries the metric across; anything the conversion cannot carry is
reported with the reason, never replaced by a metric the dataset lacks.
"""

from typing import Any, Dict, List, Optional, Tuple

from .report import ConversionReport
from .table import EVALUATOR_OF_METRIC, METRIC_ARGUMENT

#: Keys of a metric class that say how, not what (mmengine's BaseMetric).
_BASE_METRIC_KEYS = ('type', 'prefix', 'collect_device', 'collect_dir')


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
        arg = METRIC_ARGUMENT.get(kind, 'metric')
        if arg not in item:
            report.lossy(key, '(dropped)', f"{kind} names no 1.x metric (no '{arg}' argument); "
                         'mtrain evaluates with the dataset\'s evaluate(results, metric=...): '
                         'set evaluation.metric to a name your dataset computes')
            continue
        value = item[arg]
        metrics += [value] if isinstance(value, str) else list(value)
        report.note(key, 'evaluation.metric', f"{kind}({arg}={value!r}) → metric={value!r} "
                    "for the dataset's own evaluate(), as mmcv 1.x evaluated")
        _drop_rest(item, (arg, ), key, report)
    return metrics or None


def _drop_rest(item: Dict[str, Any], used: Tuple[str, ...], key: str,
               report: ConversionReport) -> None:
    for name in item:
        if name not in used and name not in _BASE_METRIC_KEYS:
            report.lossy(f'{key}.{name}', '(dropped)', f"an argument of {item['type']}; a 1.x "
                         "dataset's evaluate() takes its own arguments (add them to "
                         '`evaluation`, which passes them on)')


def metric_to_evaluator(metric: Any, report: ConversionReport) -> Optional[Any]:
    """The ``val_evaluator`` for ``evaluation.metric`` (None: no metric class computes it)."""
    names = [metric] if isinstance(metric, str) else list(metric)
    evaluators: List[Dict[str, Any]] = []
    for name in names:
        if name not in EVALUATOR_OF_METRIC:
            report.lossy('evaluation.metric', '(dropped)', f"'{name}' is computed by the "
                         "dataset's own evaluate(); mmengine evaluates with a metric class "
                         f'(known: {", ".join(sorted(EVALUATOR_OF_METRIC))}); write '
                         'val_evaluator=dict(type=...) for it')
            continue
        kind, arg, value = EVALUATOR_OF_METRIC[name]
        same = [e for e in evaluators if e['type'] == kind]
        if same:  # one class for several names: mmengine lists them in its argument
            listed = same[0][arg] if isinstance(same[0][arg], list) else [same[0][arg]]
            same[0][arg] = sorted(set(listed) | {value}) if arg == 'topk' else listed + [value]
        else:
            evaluators.append({'type': kind, arg: [value] if arg != 'metric' else value})
    for e in evaluators:
        if e['type'] == 'Accuracy':
            e['topk'] = tuple(e['topk'])
        else:
            report.note('evaluation.metric', f"val_evaluator: {e['type']}", f"{e['type']} is "
                        "the downstream package's class (mmdet 3.x / mmseg 1.x): set "
                        'default_scope and its other arguments (ann_file, ...)')
    if not evaluators:
        return None
    return evaluators[0] if len(evaluators) == 1 else evaluators


def save_best_key(name: str, to: str) -> str:
    """``save_best``'s metric name in the other framework (``accuracy/top1`` ↔ ``accuracy``)."""
    if to == 'mmcv':
        return 'accuracy' if name == 'accuracy/top1' else name.split('/')[-1]
    return 'accuracy/top1' if name == 'accuracy' else name
