"""Pins on the private torch surface mtrain relies on (``mtrain/step/torch_protocol.py``).

Each test names the private piece it pins: when a torch release changes it,
the failure says which one, and ``torch_protocol.py`` is the one file to fix.
"""

import pytest
import torch

from mtrain.step.torch_protocol import (foreach_ema_update_, scaler_flag, step_unless_flagged,
                                        supports_device_skip)

FUSED = [
    lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, fused=True),
    lambda ps: torch.optim.Adam(ps, lr=0.1, fused=True),
    lambda ps: torch.optim.AdamW(ps, lr=0.1, weight_decay=0.1, fused=True),
]


def _params():
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(3, 2)), torch.nn.Parameter(torch.randn(4))]
    for p in params:
        p.grad = torch.randn_like(p)
    return params


def _snapshot(params, optimizer):
    return ([p.detach().clone() for p in params],
            [{k: v.clone() for k, v in optimizer.state[p].items()} for p in params])


def _equal(a, b):
    return all(torch.equal(x, y) for x, y in zip(a[0], b[0])) and all(
        sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
        for sa, sb in zip(a[1], b[1]))


@pytest.mark.usefixtures('cpu_fused')
@pytest.mark.parametrize('make', FUSED, ids=['SGD', 'Adam', 'AdamW'])
def test_fused_optimizers_declare_step_supports_amp_scaling(make):
    # pins: optimizer._step_supports_amp_scaling (True for fused=True, absent/False otherwise)
    assert supports_device_skip(make(_params()))
    assert not supports_device_skip(torch.optim.SGD(_params(), lr=0.1))


@pytest.mark.usefixtures('cpu_fused')
@pytest.mark.parametrize('make', FUSED, ids=['SGD', 'Adam', 'AdamW'])
def test_found_inf_and_grad_scale_skip_or_apply_the_fused_step(make):
    # pins: the fused kernels read optimizer.found_inf (1.0 = skip) and grad_scale (None)
    params = _params()
    optimizer = make(params)
    optimizer.step()  # a first, real step creates the state (momenta, Adam's step)
    before = _snapshot(params, optimizer)
    step_unless_flagged(optimizer, torch.tensor(True))
    assert _equal(_snapshot(params, optimizer), before), 'found_inf=1.0 did not skip the step'
    assert not hasattr(optimizer, 'found_inf') and not hasattr(optimizer, 'grad_scale')
    step_unless_flagged(optimizer, torch.tensor(False))
    reference = make(p_ref := [torch.nn.Parameter(p.clone()) for p in before[0]])
    for p, q in zip(p_ref, params):
        p.grad = q.grad.clone()
    for p, state in zip(p_ref, before[1]):
        reference.state[p] = {k: v.clone() for k, v in state.items()}
    reference.step()
    assert _equal(_snapshot(params, optimizer), _snapshot(p_ref, reference)), (
        'found_inf=0.0 did not step as a plain step')


@pytest.mark.usefixtures('cpu_fused')
@pytest.mark.parametrize('overflow', [False, True])
def test_grad_scaler_hands_a_fused_step_its_verdict_as_found_inf(overflow):
    # pins: GradScaler.step sets optimizer.found_inf (a tensor, 1.0 on inf/NaN gradients)
    # on a _step_supports_amp_scaling optimizer, visible to a step post-hook, and removes it
    params = _params()
    optimizer = torch.optim.SGD(params, lr=0.1, fused=True)
    if overflow:
        params[0].grad[0, 0] = float('inf')
    flags = []
    optimizer.register_step_post_hook(lambda opt, args, kwargs: flags.append(scaler_flag(opt)))
    scaler = torch.amp.GradScaler('cpu', init_scale=1.0)
    scaler.scale(torch.ones(()))  # (creates the scale)
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    assert len(flags) == 1 and isinstance(flags[0], torch.Tensor), (
        'GradScaler no longer sets optimizer.found_inf for a fused optimizer')
    assert bool(flags[0]) == overflow
    assert not hasattr(optimizer, 'found_inf')


def test_foreach_ema_update_is_mmcvs_mul_then_add_in_place():
    # pins: torch._foreach_mul_(tensors, scalar) and _foreach_add_(tensors, others, alpha=)
    assert hasattr(torch, '_foreach_mul_') and hasattr(torch, '_foreach_add_'), (
        'torch._foreach_mul_/_foreach_add_ are gone (EMA falls back)')
    g = torch.Generator().manual_seed(0)
    averages = [torch.randn(50, generator=g), torch.randn(7, 7, generator=g)]
    values = [torch.randn(50, generator=g), torch.randn(7, 7, generator=g)]
    m = 0.0123
    expected = [a.clone().mul_(1 - m).add_(v, alpha=m) for a, v in zip(averages, values)]
    foreach_ema_update_(averages, values, m)
    assert all(torch.equal(a, e) for a, e in zip(averages, expected))
