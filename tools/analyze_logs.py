"""Plot training curves and summarise iteration times from ``*.log.json`` files.

::

    python tools/analyze_logs.py plot_curve DIR/*.log.json --keys loss accuracy --out curves.png
    python tools/analyze_logs.py cal_train_time WORK_DIR/*.log.json [--include-outliers]

Reads the JSON-lines logs ``TextLoggerHook`` writes, and those of mmcv 1.x-era
runs (mmdet 2.x, mmcls 0.x, mmseg 0.x...), which have the same shape: an
optional first line of run meta (``env_info``, ``config``, ``seed``...), then
one object per log line with ``mode`` (``train``/``val``), ``epoch``, ``iter``
and the logged values. Lines without ``mode`` are skipped.

``plot_curve`` draws one panel per key and one curve per log. A key logged
in train lines is plotted against the iteration, counted over the whole run:
for an epoch-based log (``iter`` restarts every epoch) that is
``(epoch - 1) * iters_per_epoch + iter``, with ``iters_per_epoch`` the train
loader's length that ``tools/train.py`` writes in the log's first (meta) line;
for a log without it (mmcv 1.x era), the largest train ``iter`` in the log,
which is short of the epoch when the epoch's last lines fall between log
intervals. A key only in val lines (metrics) is plotted
against the epoch, or, for an iteration-based log, against the iteration of
the train line before it.
"""

import argparse
import json
import os.path as osp
import statistics
import sys
from collections import OrderedDict
from typing import Any, Dict, List, Tuple

Record = Dict[str, Any]


def load_json_log(path: str) -> List[Record]:
    """The log lines of ``path`` (objects with a ``mode``), in file order."""
    records, per_epoch = [], None
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f'{path} line {number} is not JSON ({e.msg}); is it a '
                                 '*.log.json written by TextLoggerHook?') from e
            if not isinstance(record, dict):
                continue
            if 'mode' in record and 'epoch' in record:
                records.append(dict(record, _iters_per_epoch=per_epoch) if per_epoch
                               else record)
            elif _is_number(record.get('iters_per_epoch')):  # the run's meta line
                per_epoch = record['iters_per_epoch']
    return records


def iters_restart_each_epoch(records: List[Record]) -> bool:
    """Whether ``iter`` counts within the epoch (EpochBasedRunner) rather than the run."""
    last: Tuple[int, int] = (0, 0)
    for r in records:
        if r['mode'] != 'train':
            continue
        if r['epoch'] > last[0] and r['iter'] < last[1]:
            return True
        last = (r['epoch'], r['iter'])
    return False


def series(records: List[Record], key: str) -> Tuple[List[float], List[float], str]:
    """``(xs, ys, x label)`` of ``key``: train values by iteration, else val values."""
    per_epoch = iters_restart_each_epoch(records)
    per = max((r['iter'] for r in records if r['mode'] == 'train'), default=0)
    xs, ys, x_val, last_x = [], [], [], 0
    for r in records:
        if r['mode'] == 'train':
            length = r.get('_iters_per_epoch', per)
            last_x = (r['epoch'] - 1) * length + r['iter'] if per_epoch else r['iter']
            if _is_number(r.get(key)):
                xs.append(last_x)
                ys.append(r[key])
        elif _is_number(r.get(key)):
            x_val.append((r['epoch'] if per_epoch or not last_x else last_x, r[key]))
    if xs:
        return xs, ys, 'iter'
    return [x for x, _ in x_val], [y for _, y in x_val], 'epoch' if per_epoch else 'iter'


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def plot_curve(logs: List[Tuple[str, List[Record]]], keys: List[str], out: str = None,
               title: str = None, backend: str = None) -> None:
    """One panel per key, one curve per log; saved to ``out`` or shown."""
    # Imported here: only plotting needs matplotlib, and it takes ~1 s to import.
    import matplotlib
    if backend or out:
        matplotlib.use(backend or 'Agg')
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(keys), 1, figsize=(8, 3 * len(keys)), squeeze=False)
    for ax, key in zip(axes[:, 0], keys):
        for name, records in logs:
            xs, ys, x_label = series(records, key)
            if not xs:
                print(f'warning: {name} has no numeric {key!r}; logged keys: '
                      f'{", ".join(logged_keys(records))}', file=sys.stderr)
                continue
            ax.plot(xs, ys, label=name, marker='o' if len(xs) < 30 else None, linewidth=1)
            ax.set_xlabel(x_label)
        ax.set_ylabel(key)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if out:
        fig.savefig(out, dpi=100)
        print(f'saved {out}')
    else:
        plt.show()
    plt.close(fig)


def logged_keys(records: List[Record]) -> List[str]:
    keys = OrderedDict((k, None) for r in records for k, v in r.items() if _is_number(v))
    return [k for k in keys if k not in ('epoch', 'iter') and not k.startswith('_')]


def cal_train_time(records: List[Record], include_outliers: bool = False) -> Dict[str, Any]:
    """Per-epoch mean of the train lines' ``time``: slowest, fastest, spread, overall."""
    by_epoch: Dict[int, List[float]] = OrderedDict()
    for r in records:
        if r['mode'] == 'train' and _is_number(r.get('time')):
            by_epoch.setdefault(r['epoch'], []).append(r['time'])
    if not by_epoch:
        raise ValueError('no train line with a time value: the log has no training lines, '
                         'or IterTimerHook was off')
    if not include_outliers:  # each epoch's first line includes the loader start-up
        by_epoch = OrderedDict((e, t[1:]) for e, t in by_epoch.items() if len(t) > 1)
    if not by_epoch:
        raise ValueError('every epoch has one train line, which includes the loader start-up; '
                         'log more often (a smaller log_config.interval) or pass '
                         '--include-outliers')
    means = {epoch: statistics.fmean(times) for epoch, times in by_epoch.items()}
    slowest = max(means, key=means.get)
    fastest = min(means, key=means.get)
    all_times = [t for times in by_epoch.values() for t in times]
    return {'slowest_epoch': slowest, 'slowest_time': means[slowest],
            'fastest_epoch': fastest, 'fastest_time': means[fastest],
            'std_over_epochs': statistics.pstdev(means.values()),
            'average_iter_time': statistics.fmean(all_times)}


def print_train_time(path: str, result: Dict[str, Any]) -> None:
    print(f'-----Analyze train time of {path}-----')
    print(f"slowest epoch {result['slowest_epoch']}, average time is "
          f"{result['slowest_time']:.4f} s/iter")
    print(f"fastest epoch {result['fastest_epoch']}, average time is "
          f"{result['fastest_time']:.4f} s/iter")
    print(f"time std over epochs is {result['std_over_epochs']:.4f}")
    print(f"average iter time: {result['average_iter_time']:.4f} s/iter")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Analyze *.log.json training logs.')
    tasks = parser.add_subparsers(dest='task', required=True)
    plot = tasks.add_parser('plot_curve', help='plot logged values')
    plot.add_argument('json_logs', nargs='+', help='*.log.json files')
    plot.add_argument('--keys', nargs='+', default=['loss'], help='values to plot')
    plot.add_argument('--legend', nargs='+', help='one name per log (default: file names)')
    plot.add_argument('--title', help='figure title')
    plot.add_argument('--out', help='image file to write (default: show a window)')
    plot.add_argument('--backend', help='matplotlib backend (default: Agg with --out)')
    timing = tasks.add_parser('cal_train_time', help='summarise the time per iteration')
    timing.add_argument('json_logs', nargs='+', help='*.log.json files')
    timing.add_argument('--include-outliers', action='store_true',
                        help="keep each epoch's first line (loader start-up) in the average")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        logs = [load_json_log(path) for path in args.json_logs]
        if args.task == 'plot_curve':
            names = args.legend or [osp.basename(p).replace('.log.json', '')
                                    for p in args.json_logs]
            if len(names) != len(logs):
                raise ValueError(f'--legend gives {len(names)} names for {len(logs)} logs')
            plot_curve(list(zip(names, logs)), args.keys, args.out, args.title, args.backend)
        else:
            for path, records in zip(args.json_logs, logs):
                print_train_time(path, cal_train_time(records, args.include_outliers))
    except (OSError, ValueError) as e:
        print(f'error: {e}', file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main())
