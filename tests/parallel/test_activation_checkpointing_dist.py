"""Activation checkpointing under DDP and FSDP2 on 2 gloo ranks: the plain run's weights."""

import pytest
import torch

from dist_launch import launch
from mtrain.models.activation_checkpointing import apply_activation_checkpointing
from mtrain.parallel import MTDistributedDataParallel, MTFullyShardedDataParallel
from mtrain.runner import load_checkpoint_file
from toy_training import train_toy

try:
    from torch.distributed.fsdp import fully_shard  # noqa: F401
    HAS_FSDP2 = True
except ImportError:  # torch < 2.6
    HAS_FSDP2 = False

pytestmark = pytest.mark.slow


def _wrapper(name, checkpointed):
    """Checkpoint ``fc1`` (a Linear; under FSDP2 its own shard) on the plain model, then wrap."""
    def wrap(model):
        if checkpointed:
            apply_activation_checkpointing(model, dict(modules=['fc1']))
        if name == 'ddp':
            return MTDistributedDataParallel(model)
        return MTFullyShardedDataParallel(model, shard_layers=['Linear'])
    return wrap


def _job(rank, model_cls, dataset_cls, work_dir, wrapper, checkpointed):
    train_toy(model_cls, dataset_cls, work_dir, 8, 1, _wrapper(wrapper, checkpointed))


@pytest.mark.parametrize('wrapper', [
    'ddp', pytest.param('fsdp', marks=pytest.mark.skipif(not HAS_FSDP2, reason='torch < 2.6'))])
def test_two_ranks_train_the_same_weights_with_and_without_checkpointing(
        tmp_path, toy_model, toy_dataset, wrapper):
    weights = {}
    for checkpointed in (False, True):
        work_dir = tmp_path / str(checkpointed)
        codes, _ = launch(_job, type(toy_model), type(toy_dataset), str(work_dir), wrapper,
                          checkpointed)
        assert codes == [0, 0]
        # (under FSDP a sharded checkpoint's folder: read whole, as a file is)
        weights[checkpointed] = load_checkpoint_file(str(work_dir / 'epoch_2.pth'))['state_dict']
    assert list(weights[True]) == list(weights[False])  # the plain model's keys
    for name, value in weights[False].items():  # 16 steps, bitwise
        assert torch.equal(weights[True][name], value), name
