"""Activation checkpointing: the same gradients and statistics, fewer activations."""

import copy

import pytest
import torch
from torch import nn

from mtrain.models.activation_checkpointing import apply_activation_checkpointing
from mtrain.utils import ConfigError


class Block(nn.Module):
    """Conv → BatchNorm → ReLU → Dropout: running statistics and RNG in the recomputation."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(width, width, 3, padding=1)
        self.bn = nn.BatchNorm2d(width)
        self.drop = nn.Dropout(0.3)

    def forward(self, x, scale=1.0):
        return self.drop(torch.relu(self.bn(self.conv(x)))) * scale + x


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.backbone = nn.Sequential(Block(8), Block(8), Block(8))
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        x = self.backbone(self.stem(x))
        return self.head(x.mean((2, 3)))


def _grads_and_stats(model, steps=2, dtype=None):
    """Gradients of each step, then the buffers: with the same seed for both runs (dropout)."""
    torch.manual_seed(1)
    out = []
    for _ in range(steps):
        x = torch.randn(4, 3, 8, 8)
        with torch.autocast('cpu', dtype=dtype, enabled=dtype is not None):
            loss = model(x).float().square().mean()
        model.zero_grad()
        loss.backward()
        out += [p.grad.clone() for p in model.parameters()]
    return out, [b.clone() for b in model.buffers()]


@pytest.mark.parametrize('dtype', [None, torch.bfloat16])
@pytest.mark.parametrize('modules', [['backbone.1'], ['Block'], ['backbone']])
def test_gradients_and_batchnorm_statistics_are_bitwise_those_of_the_plain_model(modules, dtype):
    plain = Net()
    checkpointed = copy.deepcopy(plain)
    done = apply_activation_checkpointing(checkpointed, dict(modules=modules))
    assert done == {'backbone.1': ['backbone.1'], 'Block': ['backbone.0', 'backbone.1',
                    'backbone.2'], 'backbone': ['backbone']}[modules[0]]
    grads, stats = _grads_and_stats(plain, dtype=dtype)
    grads_ckpt, stats_ckpt = _grads_and_stats(checkpointed, dtype=dtype)
    for a, b in zip(grads + stats, grads_ckpt + stats_ckpt, strict=True):
        assert torch.equal(a, b)  # bitwise: the recomputation repeats the same kernels
    assert stats[2].item() == 2  # num_batches_tracked: each batch counted once, not twice


def test_the_recomputation_runs_in_the_backward_and_names_and_state_dict_keys_stay():
    model = Net()
    keys = list(model.state_dict())
    apply_activation_checkpointing(model, dict(modules=['Block']))
    calls = []
    model.backbone[0].conv.register_forward_hook(lambda *a: calls.append(torch.is_grad_enabled()))
    model(torch.randn(2, 3, 8, 8)).sum().backward()
    assert len(calls) == 2  # the forward, then its recomputation in the backward
    assert list(model.state_dict()) == keys
    copied = copy.deepcopy(model)  # an EMA copy recomputes its own forward, not the original's
    assert copied.backbone[0].forward.__self__ is copied.backbone[0]


@pytest.mark.parametrize('cfg, key, hint', [
    (dict(modules=['backbone.layer3']), 'activation_checkpointing.modules.0', "'backbone.2'"),
    (dict(modules=['Blok']), 'activation_checkpointing.modules.0', "'Block'"),
    (dict(modules=['Block', 'haed']), 'activation_checkpointing.modules.1', "'head'"),
    (dict(module=['Block']), 'activation_checkpointing', 'dict(modules=[...])'),
    (dict(modules=[]), 'activation_checkpointing.modules', 'non-empty list'),
])
def test_an_unknown_module_is_a_one_line_config_error_with_the_closest_names(cfg, key, hint):
    with pytest.raises(ConfigError) as err:
        apply_activation_checkpointing(Net(), cfg)
    assert err.value.key == key and hint in str(err.value) and '\n' not in str(err.value)
