"""FSDP2 (``fully_shard``) on 2 gloo ranks on the CPU: same training, whole-model checkpoints."""

import json
import os

import pytest
import torch

from dist_launch import launch
from mtrain.parallel import MTFullyShardedDataParallel
from toy_training import params, train_toy

try:
    from torch.distributed.fsdp import fully_shard  # noqa: F401
    HAS_FSDP2 = True
except ImportError:  # torch < 2.6
    HAS_FSDP2 = False

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not HAS_FSDP2, reason='FSDP2 (fully_shard) needs torch >= 2.6; the wrapper says so when built')]


def _json_lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f if 'grad_norm' in line]


def _shard_linear_layers(model):
    return MTFullyShardedDataParallel(model, shard_layers=['Linear'])


# Whole-model files, not the sharded folders FSDP writes by default (test_sharded_checkpoint.py).
WHOLE_FILES = dict(interval=1, sharded=False)
# The LR drops after epoch 1: the resumed epoch 2 must take the saved initial_lr.
STEP = dict(policy='step', step=[1])


def _fsdp_job(rank, model_cls, dataset_cls, work_dir, cumulative_iters, resume):
    if not resume:
        train_toy(model_cls, dataset_cls, work_dir, 8, cumulative_iters, _shard_linear_layers,
                  checkpoint_config=WHOLE_FILES, lr_config=STEP)
        return
    train_toy(model_cls, dataset_cls, work_dir, 8, cumulative_iters, _shard_linear_layers,
              max_epochs=1, checkpoint_config=WHOLE_FILES, lr_config=STEP)
    # Resume the written checkpoint (weights and sharded momentum) for the second epoch.
    train_toy(model_cls, dataset_cls, work_dir, 8, cumulative_iters, _shard_linear_layers,
              resume_from=os.path.join(work_dir, 'epoch_1.pth'), checkpoint_config=WHOLE_FILES,
              lr_config=STEP)


# Accumulation windows follow the run's length, so the accumulating run is not split.
@pytest.mark.parametrize('cumulative_iters, resume', [(1, True), (3, False)])
def test_fsdp_two_ranks_match_one_process_with_whole_model_checkpoints(
        tmp_path, toy_model, toy_dataset, cumulative_iters, resume):
    model_cls, dataset_cls = type(toy_model), type(toy_dataset)
    reference = train_toy(model_cls, dataset_cls, tmp_path / 'single', 16, cumulative_iters,
                          lr_config=STEP)
    codes, _ = launch(_fsdp_job, model_cls, dataset_cls, str(tmp_path / 'fsdp'),
                      cumulative_iters, resume)
    assert codes == [0, 0]
    expected = params(reference.model_wrapper.module)
    ckpt = torch.load(tmp_path / 'fsdp' / 'epoch_2.pth', weights_only=True)
    assert ckpt['progress']['num_updates'] == reference.num_updates
    for name, value in expected.items():  # whole tensors, not shards
        torch.testing.assert_close(ckpt['state_dict'][name], value, rtol=0, atol=1e-6)
    # Clipping used the global gradient norm (logged as in one process).
    single = _json_lines(tmp_path / 'single' / 'rank0.log.json')
    sharded = _json_lines(tmp_path / 'fsdp' / 'rank0.log.json')
    assert [l['grad_norm'] for l in sharded] == pytest.approx([l['grad_norm'] for l in single],
                                                             abs=2e-5)
    # The optimizer state holds every parameter's full momentum, keyed by name.
    momentum = reference.optimizer.state_dict()['state']
    for index, name in enumerate(n for n, _ in reference.model_wrapper.module.named_parameters()):
        torch.testing.assert_close(ckpt['optimizer']['state'][name]['momentum_buffer'],
                                   momentum[index]['momentum_buffer'], rtol=0, atol=1e-6)
