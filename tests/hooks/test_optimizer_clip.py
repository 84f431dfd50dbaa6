"""Which gradients ``grad_clip`` clips, in which order: mmcv's and mmengine's, to the bit.

mmcv 1.7.2's ``OptimizerHook.after_train_iter`` (``runner/hooks/optimizer.py``)
clips ``runner.model.parameters()`` that are trainable and hold a gradient, in
the model's order, whether the optimizer holds them or not; mmengine 0.10
clips its optimizer's parameters, one group per parameter in the model's
order. The expected weights below follow those loops in plain torch.
"""

import copy

import pytest
import torch
from torch.nn.utils import clip_grad_norm_

from mtrain.config_convert import convert, for_training
from mtrain.hooks import Hook, OptimizerHook
from mtrain.optim import build_optimizer


class _Batches(Hook):
    """Records each training batch, to replay them in the plain loop."""

    priority = 'HIGHEST'

    def __init__(self):
        self.batches = []

    def before_train_iter(self, runner):
        self.batches.append(copy.deepcopy(runner.data_batch))


def _train(make_runner, loader, model, optimizer, hook, iters=20):
    runner = make_runner(model=model, by_epoch=False, max_len=iters)
    runner.optimizer = optimizer
    batches = _Batches()
    runner.register_hook(hook)
    runner.register_hook(batches)
    runner.run([loader], [('train', 1)])
    return runner, batches.batches


def _plain(model, optimizer, batches, max_norm, clipped):
    """The reference loop: zero_grad, backward, clip ``clipped(model, optimizer)``, step."""
    for batch in batches:
        optimizer.zero_grad()
        model(**batch)['loss_cls'].backward()
        params = [p for p in clipped(model, optimizer) if p.requires_grad and p.grad is not None]
        clip_grad_norm_(params, max_norm=max_norm)
        optimizer.step()


def _head_only(model):
    return torch.optim.SGD(model.fc2.parameters(), lr=0.5, momentum=0.9)


def _assert_bitwise(a, b):
    for (name, x), y in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(x, y), name


def test_head_only_optimizer_clips_the_whole_models_gradients_as_mmcv(make_runner, toy_model,
                                                                      toy_loader):
    # Fine-tuning the head while the trunk still computes gradients: mmcv's norm counts them.
    reference = copy.deepcopy(toy_model)
    _, batches = _train(make_runner, toy_loader, toy_model, _head_only(toy_model),
                        OptimizerHook(grad_clip=dict(max_norm=0.1)))
    _plain(reference, _head_only(reference), batches, 0.1,
           lambda model, optimizer: model.parameters())
    _assert_bitwise(toy_model, reference)
    assert torch.equal(toy_model.fc1.weight, reference.fc1.weight)  # (the trunk never moved)


def test_head_only_optimizer_clips_the_optimizers_gradients_as_mmengine(make_runner, toy_model,
                                                                        toy_loader):
    reference = copy.deepcopy(toy_model)
    _, batches = _train(make_runner, toy_loader, toy_model, _head_only(toy_model),
                        OptimizerHook(grad_clip=dict(max_norm=0.1), clip_params='optimizer'))
    _plain(reference, _head_only(reference), batches, 0.1,
           lambda model, optimizer: [p for g in optimizer.param_groups for p in g['params']])
    _assert_bitwise(toy_model, reference)


def _paramwise(model, merge):
    return build_optimizer(model, dict(
        type='SGD', lr=0.5, momentum=0.9, weight_decay=1e-3,
        paramwise_cfg=dict(bias_decay_mult=0., merge_groups=merge)))


@pytest.mark.parametrize('clip_params', ['model', 'optimizer'])
def test_merged_param_groups_clip_bitwise_as_one_group_per_parameter(make_runner, toy_model,
                                                                     toy_loader, clip_params):
    # Merging puts both biases after both weights; the norm must still sum in model order.
    merged_model, split_model = toy_model, copy.deepcopy(toy_model)
    reference = copy.deepcopy(toy_model)
    merged, split = _paramwise(merged_model, True), _paramwise(split_model, False)
    assert len(merged.param_groups) == 2 and len(split.param_groups) == 4
    hook = dict(grad_clip=dict(max_norm=0.1), clip_params=clip_params)
    _, batches = _train(make_runner, toy_loader, merged_model, merged, OptimizerHook(**hook))
    _train(make_runner, toy_loader, split_model, split, OptimizerHook(**hook))
    _assert_bitwise(merged_model, split_model)
    _plain(reference, _paramwise(reference, False), batches, 0.1,
           lambda model, optimizer: model.parameters())
    _assert_bitwise(split_model, reference)


def test_clip_params_is_checked():
    with pytest.raises(ValueError, match="clip_params must be 'model'"):
        OptimizerHook(grad_clip=dict(max_norm=1), clip_params='groups')


def test_an_mmengine_config_clips_as_mmengine_and_its_mmcv_file_as_mmcv():
    # Training from an mmengine-schema config means mmengine's clip; a file written for
    # mmcv 1.7.2 must carry only mmcv's keys (its OptimizerHook has no clip_params).
    cfg = dict(model=dict(type='ToyModel'), train_cfg=dict(by_epoch=False, max_iters=10),
               optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1), clip_grad=dict(max_norm=1)))
    assert for_training(copy.deepcopy(cfg))['optimizer_config'] == dict(
        grad_clip=dict(max_norm=1), clip_params='optimizer')
    assert convert(copy.deepcopy(cfg), 'mmcv')[0]['optimizer_config'] == dict(
        grad_clip=dict(max_norm=1))


def test_merged_groups_clip_as_mmengines_own_optim_wrapper(make_runner, toy_model, toy_loader):
    # mmengine 0.10.7 itself: build_optim_wrapper (one group per parameter) and update_params.
    from mmengine.optim import build_optim_wrapper

    reference = copy.deepcopy(toy_model)
    optimizer = build_optimizer(toy_model, dict(
        type='SGD', lr=0.5, momentum=0.9, weight_decay=1e-3,
        constructor='DefaultOptimWrapperConstructor', paramwise_cfg=dict(bias_decay_mult=0.)))
    assert len(optimizer.param_groups) == 2  # merged
    _, batches = _train(make_runner, toy_loader, toy_model, optimizer,
                        OptimizerHook(grad_clip=dict(max_norm=0.1), clip_params='optimizer'))
    wrapper = build_optim_wrapper(reference, dict(
        type='OptimWrapper', clip_grad=dict(max_norm=0.1),
        optimizer=dict(type='SGD', lr=0.5, momentum=0.9, weight_decay=1e-3),
        paramwise_cfg=dict(bias_decay_mult=0.)))
    assert len(wrapper.optimizer.param_groups) == 4
    for batch in batches:
        wrapper.update_params(reference(**batch)['loss_cls'])
    _assert_bitwise(toy_model, reference)
