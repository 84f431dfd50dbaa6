"""ThroughputMonitorHook on 2 gloo ranks: figures in rank 0's log; samples/s is the job's."""

import json

import pytest
import torch

from dist_launch import launch
from mtrain.datasets import build_dataloader
from mtrain.hooks import IterTimerHook, OptimizerHook, TextLoggerHook, ThroughputMonitorHook
from mtrain.parallel import MTDistributedDataParallel
from mtrain.runner import EpochBasedRunner
from mtrain.runner.log_buffer import LogBuffer
from mtrain.utils import get_logger


def _job(rank, model_cls, dataset_cls, work_dir):
    model = MTDistributedDataParallel(model_cls())
    runner = EpochBasedRunner(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                              work_dir=work_dir, logger=get_logger(), max_epochs=1)
    for hook, priority in ((OptimizerHook(), 'ABOVE_NORMAL'), (IterTimerHook(), 'LOW'),
                           (ThroughputMonitorHook(), 'LOW'), (TextLoggerHook(interval=2),
                                                               'VERY_LOW')):
        runner.register_hook(hook, priority)
    runner.timestamp = 'ddp'
    loader = build_dataloader(dataset_cls(64), 8, 0, shuffle=True, seed=0)  # 4 batches a rank
    runner.run([loader], [('train', 1)])


@pytest.mark.slow
def test_two_ranks_log_the_figures_with_each_processs_flops(tmp_path, toy_model, toy_dataset):
    codes, _ = launch(_job, type(toy_model), type(toy_dataset), str(tmp_path))
    assert codes == [0, 0]
    with open(tmp_path / 'ddp.log.json') as f:
        lines = [r for r in map(json.loads, f) if r.get('mode') == 'train']
    # ToyModel on 8 samples: forward 2·8·(4·8 + 8·3), weight grads the same, fc2's input grad
    flops = 2 * 8 * (32 + 24) * 2 + 2 * 8 * 24
    assert [r['gflop_per_iter'] for r in lines] == [round(flops / 1e9, 5)] * 2
    assert all(r['samples_per_s'] > 0 and 0 <= r['data_wait'] <= 1 for r in lines)


def test_samples_per_s_is_summed_over_ranks_and_data_wait_averaged():
    """Two ranks' sources through the buffer's reduction (sum of (total, count) by key)."""
    hooks = [ThroughputMonitorHook(), ThroughputMonitorHook()]
    for hook, (data, wall, samples) in zip(hooks, [(0.1, 1.0, 100), (0.3, 2.0, 100)]):
        hook._world_size = 2
        hook._clock.add(data, wall, samples)
    other = hooks[1]._take_sums()

    def two_ranks(totals):
        return {k: (s + other[k][0], c + other[k][1]) for k, (s, c) in totals.items()}

    buffer = LogBuffer()
    buffer.add_source(hooks[0]._take_sums)
    buffer.average_interval(two_ranks)
    assert buffer.output['samples_per_s'] == pytest.approx(100 / 1.0 + 100 / 2.0)
    assert buffer.output['data_wait'] == pytest.approx((0.1 / 1.0 + 0.3 / 2.0) / 2)
