"""Real 2-process gloo training on the CPU: DDP semantics, logging, evaluation.

Each test forks a 2-rank job (see ``dist_launch.py``) that trains the shared
toy model with the real runner and hooks, saves what it ended with, and is
compared with the same training in this (single) process.
"""

import json
import logging
import os

import pytest
import torch
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.utils.data import Dataset

from dist_launch import launch
from mtrain.datasets import build_dataloader
from mtrain.hooks import EvalHook
from mtrain.parallel import MTDistributedDataParallel
from mtrain.runner import BaseRunner
from mtrain.utils import get_logger
from toy_training import params, train_toy

pytestmark = pytest.mark.slow

SAMPLES_PER_RANK = 8


class _Calls:
    count = 0


def _counting_allreduce(state: _Calls, bucket):
    state.count += 1
    return default_hooks.allreduce_hook(None, bucket)


def _ddp_job(rank, model_cls, dataset_cls, work_dir, out_dir, cumulative_iters):
    calls = _Calls()

    def wrap(model):
        ddp = MTDistributedDataParallel(model)
        ddp.register_comm_hook(calls, _counting_allreduce)
        return ddp

    runner = train_toy(model_cls, dataset_cls, work_dir, SAMPLES_PER_RANK, cumulative_iters, wrap)
    torch.save({'params': params(runner.model_wrapper.module), 'allreduce_calls': calls.count,
                'num_updates': runner.num_updates}, os.path.join(out_dir, f'rank{rank}.pt'))


def _json_lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


@pytest.mark.parametrize('cumulative_iters', [1, 3])
def test_two_ranks_of_batch_b_equal_one_process_of_batch_2b(tmp_path, toy_model, toy_dataset,
                                                            cumulative_iters):
    """Same parameters (1e-6), same logged losses, rank-0-only files, all-reduces = updates."""
    model_cls, dataset_cls = type(toy_model), type(toy_dataset)
    reference = train_toy(model_cls, dataset_cls, tmp_path / 'single', 2 * SAMPLES_PER_RANK,
                          cumulative_iters)
    out = tmp_path / 'out'
    out.mkdir()
    codes, _ = launch(_ddp_job, model_cls, dataset_cls, tmp_path / 'ddp', str(out),
                      cumulative_iters)
    assert codes == [0, 0]
    ranks = [torch.load(out / f'rank{r}.pt', weights_only=True) for r in (0, 1)]
    expected = params(reference.model_wrapper.module)
    for result in ranks:
        for name, value in expected.items():
            torch.testing.assert_close(result['params'][name], value, rtol=0, atol=1e-6)
    # 8 iterations per rank: every one steps, or windows of 3, 3, 2 (3 updates).
    updates = 8 if cumulative_iters == 1 else 3
    assert [r['num_updates'] for r in ranks] == [updates, updates] == [reference.num_updates] * 2
    # The toy model fits in DDP's first bucket: one all-reduce per synchronised backward.
    assert [r['allreduce_calls'] for r in ranks] == [updates, updates]
    ddp_files = sorted(os.listdir(tmp_path / 'ddp'))
    assert ddp_files == ['epoch_1.pth', 'epoch_2.pth', 'latest.pth', 'rank0.log.json']
    ckpt = torch.load(tmp_path / 'ddp' / 'epoch_2.pth', weights_only=True)
    for name, value in expected.items():
        torch.testing.assert_close(ckpt['state_dict'][name], value, rtol=0, atol=1e-6)
    # The logged losses are means over both ranks: those of one process with batch 2B.
    single = [l for l in _json_lines(tmp_path / 'single' / 'rank0.log.json') if 'loss' in l]
    ddp = [l for l in _json_lines(tmp_path / 'ddp' / 'rank0.log.json') if 'loss' in l]
    assert len(ddp) == len(single) == 4  # interval 2, 4 iterations per epoch, 2 epochs
    for a, b in zip(ddp, single):
        assert set(a) == set(b)  # grad_norm only where an interval had an update
        for key in {'loss', 'acc', 'grad_norm'} & set(a):
            assert a[key] == pytest.approx(b[key], abs=2e-5)


class _IndexDataset(Dataset):
    """Sample i is the number i; ``evaluate`` reports what it was given."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        return {'img': torch.tensor([float(i)])}

    def evaluate(self, results, metric='accuracy', logger=None):
        return {'count': float(len(results)), 'sum': float(results.sum())}


class _Echo(nn.Module):
    """Returns its input (a 1x1 identity layer, so DDP has a parameter)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(1, 1)
        nn.init.ones_(self.fc.weight)
        nn.init.zeros_(self.fc.bias)

    def forward(self, img):
        return self.fc(img)


def _eval_job(rank, n, out_dir):
    runner = BaseRunner(MTDistributedDataParallel(_Echo()), logger=get_logger())
    hook = EvalHook(build_dataloader(_IndexDataset(n), 4, 0, shuffle=False))
    predictions = hook.test(runner)  # rank 0 gathers them; the others get None
    hook.score_and_share(runner, predictions)  # rank 0 scores; every rank gets the metrics
    results = runner.eval_results
    torch.save({'predictions': predictions, 'results': results},
               os.path.join(out_dir, f'rank{rank}.pt'))


def test_evaluation_over_two_ranks_scores_an_odd_dataset_once_per_sample(tmp_path):
    n = 21  # rank 1's share is padded with a repeat of sample 0
    codes, _ = launch(_eval_job, n, str(tmp_path))
    assert codes == [0, 0]
    for rank in (0, 1):
        result = torch.load(tmp_path / f'rank{rank}.pt', weights_only=True)
        if rank == 0:
            assert result['predictions'].flatten().tolist() == [float(i) for i in range(n)]
        else:
            assert result['predictions'] is None
        assert result['results'] == {'count': n, 'sum': n * (n - 1) / 2}


class _TwoHeads(nn.Module):
    """A shared trunk and two task heads, plus a layer no loss ever uses."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.trunk = nn.Linear(4, 8)
        self.head_a = nn.Linear(8, 2)
        self.head_b = nn.Linear(8, 3)
        self.unused = nn.Linear(8, 1)

    def forward(self, img, task):
        feat = torch.relu(self.trunk(img))
        head = self.head_a if task == 'a' else self.head_b
        return {'loss': head(feat).pow(2).mean()}


def _anomalous_job(rank, out_dir):
    records = []
    handler = _ListHandler(records)
    get_logger().addHandler(handler)
    model = MTDistributedDataParallel(_TwoHeads(), find_unused_parameters=True,
                                      detect_anomalous_params=True)
    model.train_step({'img': torch.randn(5, 4), 'task': 'a'})['loss'].backward()
    get_logger().removeHandler(handler)
    with open(os.path.join(out_dir, f'rank{rank}.json'), 'w') as f:
        json.dump(records, f)


class _ListHandler(logging.Handler):
    def __init__(self, records):
        super().__init__()
        self.records = records

    def emit(self, record):
        self.records.append(record.getMessage())


def test_detect_anomalous_params_names_each_unused_parameter(tmp_path):
    codes, _ = launch(_anomalous_job, str(tmp_path))
    assert codes == [0, 0]
    with open(tmp_path / 'rank1.json') as f:
        messages = json.load(f)
    named = sorted(m.split(' is not')[0] for m in messages)
    assert named == ['head_b.bias with shape (3,)', 'head_b.weight with shape (3, 8)',
                     'unused.bias with shape (1,)', 'unused.weight with shape (1, 8)']
