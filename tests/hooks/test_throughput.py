"""ThroughputMonitorHook: counted FLOPs, data wait under a slow loader, the hint, the trackers."""

import csv
import json
import logging
import os.path as osp
import time

import pytest
import torch
from torch import nn
from torch.utils.data import Dataset

from mtrain.datasets import build_dataloader
from mtrain.hooks import (IterTimerHook, OptimizerHook, TensorboardLoggerHook, TextLoggerHook,
                          ThroughputMonitorHook)
from mtrain.hooks.throughput import peak_flops, table_peak
from mtrain.registry import HOOKS, build
from mtrain.runner import EpochBasedRunner

IN, HIDDEN, OUT, BATCH = 256, 512, 10, 64


class Features(Dataset):
    """``n`` samples of ``IN`` features; each read sleeps ``delay`` seconds (a slow pipeline)."""

    def __init__(self, n: int = 256, delay: float = 0.) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, IN, generator=g)
        self.y = torch.randint(0, OUT, (n,), generator=g)
        self.delay = delay

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i):
        if self.delay:
            time.sleep(self.delay)
        return {'img': self.x[i], 'gt_label': self.y[i]}


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1, self.fc2 = nn.Linear(IN, HIDDEN), nn.Linear(HIDDEN, OUT)

    def forward(self, img, gt_label=None):
        return {'loss': nn.functional.cross_entropy(self.fc2(self.fc1(img).relu()), gt_label)}


def _analytic_flops(batch: int) -> int:
    """2·B·in·out per matrix product: forward of both layers, both weight gradients,
    and the input gradient of fc2 only (the input of fc1 needs none)."""
    fc1, fc2 = IN * HIDDEN, HIDDEN * OUT
    return 2 * batch * (fc1 + fc2) + 2 * batch * (fc1 + fc2) + 2 * batch * fc2


def _run(logger, work_dir, loader, monitor, *extra_hooks, max_len=1):
    """Train the MLP for ``max_len`` epochs, logging every 2 iterations; the train lines."""
    work_dir.mkdir(exist_ok=True)
    model = MLP()
    runner = EpochBasedRunner(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                              work_dir=str(work_dir), logger=logger, max_epochs=max_len)
    runner.register_hook(OptimizerHook())
    runner.register_hook(IterTimerHook(), 'LOW')
    runner.register_hook(monitor)
    runner.register_hook(TextLoggerHook(interval=2), 'VERY_LOW')
    for hook in extra_hooks:
        runner.register_hook(hook, 'VERY_LOW')
    runner.run([loader], [('train', max_len)])
    [log] = [p for p in work_dir.iterdir() if p.name.endswith('.log.json')]
    return [r for r in map(json.loads, log.read_text().splitlines()) if r.get('mode') == 'train']


def test_logged_flops_of_an_mlp_equal_the_analytic_count_in_the_json_log_and_tensorboard(
        logger, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    loader = build_dataloader(Features(), BATCH, 0, shuffle=False)
    monitor = ThroughputMonitorHook()
    lines = _run(logger, tmp_path, loader, monitor, TensorboardLoggerHook(interval=2))

    flops = _analytic_flops(BATCH)
    assert monitor.flops_per_iter == flops == 35_520_512
    assert [r['gflop_per_iter'] for r in lines] == [round(flops / 1e9, 5)] * 2
    assert all(r['samples_per_s'] > 0 and 0 <= r['data_wait'] <= 1 for r in lines)
    assert 'mfu' not in lines[0]  # the CPU has no known peak
    acc = EventAccumulator(str(tmp_path / 'tf_logs'))
    acc.Reload()
    scalars = {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()['scalars']}
    assert [s for s, _ in scalars['train/gflop_per_iter']] == [2, 4]
    assert scalars['train/gflop_per_iter'][0][1] == pytest.approx(flops / 1e9, rel=1e-6)
    assert [v for _, v in scalars['train/samples_per_s']] == pytest.approx(
        [r['samples_per_s'] for r in lines], rel=1e-4)
    assert [v for _, v in scalars['train/data_wait']] == pytest.approx(
        [r['data_wait'] for r in lines], abs=1e-5)


def test_mfu_is_the_flop_rate_over_the_given_peak(logger, tmp_path):
    loader = build_dataloader(Features(), BATCH, 0, shuffle=False)
    lines = _run(logger, tmp_path, loader, ThroughputMonitorHook(peak_flops=1e12))
    for line in lines:  # the iterations per second are samples_per_s / BATCH (same clock)
        assert line['mfu'] == pytest.approx(
            _analytic_flops(BATCH) * line['samples_per_s'] / BATCH / 1e12, rel=1e-4, abs=2e-5)


def test_data_wait_rises_with_a_slow_loader_and_the_hint_is_printed_once(
        logger, tmp_path, caplog):
    fast = _run(logger, tmp_path / 'fast', build_dataloader(Features(16), 2, 0),
                ThroughputMonitorHook(hint_window=4, hint_threshold=0.5), max_len=2)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger='mtrain.test'):
        slow = _run(logger, tmp_path / 'slow', build_dataloader(Features(16, delay=0.01), 2, 0),
                    ThroughputMonitorHook(hint_window=4, hint_threshold=0.5), max_len=2)
    hints = [r.message for r in caplog.records if 'bottleneck' in r.message]
    assert len(hints) == 1 and 'workers_per_gpu (now 0)' in hints[0]
    # 20 ms of sleep per batch against well under a millisecond of compute
    assert min(r['data_wait'] for r in slow) > 0.8
    assert sum(r['data_wait'] for r in slow) > sum(r['data_wait'] for r in fast)


def test_the_figures_reach_an_offline_tracker(logger, tmp_path):
    pytest.importorskip('dvclive', reason="pip install -e '.[trackers]'")
    loader = build_dataloader(Features(), BATCH, 0, shuffle=False)
    dvclive = build(dict(type='DvcliveLoggerHook', interval=2, save_dvc_exp=False,
                         dvcyaml=None), HOOKS, 'hook')
    lines = _run(logger, tmp_path, loader, ThroughputMonitorHook(), dvclive)
    metrics = osp.join(tmp_path, 'dvclive', 'plots', 'metrics', 'train')
    for name in ('gflop_per_iter', 'samples_per_s', 'data_wait'):
        with open(osp.join(metrics, f'{name}.tsv')) as f:
            rows = list(csv.DictReader(f, delimiter='\t'))
        assert [int(r['step']) for r in rows] == [2, 4]
        assert [float(r[name]) for r in rows] == pytest.approx([r[name] for r in lines],
                                                               rel=1e-4, abs=1e-5)


def test_bad_settings_fail_when_built_and_the_cpu_has_no_peak():
    with pytest.raises(ValueError, match='hint_threshold is a share'):
        ThroughputMonitorHook(hint_threshold=30)
    with pytest.raises(ValueError, match='hint_window must be a positive'):
        ThroughputMonitorHook(hint_window=0)
    assert peak_flops(torch.device('cpu'), None)[0] is None


@pytest.mark.parametrize('name, dtype, peak', [
    ('NVIDIA H100 PCIe', 'bfloat16', 756e12), ('NVIDIA H100 80GB HBM3', 'bfloat16', 989.4e12),
    ('NVIDIA H200', 'tfloat32', 494.7e12), ('NVIDIA L40S', 'float16', 362.1e12),
    ('NVIDIA L4', 'float32', 30.3e12), ('Tesla V100-SXM2-16GB', 'bfloat16', None),
    ('NVIDIA H20', 'bfloat16', None), ('NVIDIA GeForce RTX 4090', 'float16', None)])
def test_the_peak_table_matches_whole_device_names_first_match_first(name, dtype, peak):
    assert table_peak(name, dtype) == peak
