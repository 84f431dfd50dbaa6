"""Merged param groups: every parameter's numbers equal mmcv's per-parameter plan, old
per-parameter checkpoints resume, and the layout is deterministic."""

import types

import pytest
import torch
from test_param_groups import CASES, ExampleModel
from torch import nn

from mtrain.hooks import (CosineAnnealingLrUpdaterHook, CosineAnnealingMomentumUpdaterHook,
                          OptimizerHook, StepLrUpdaterHook)
from mtrain.optim import build_optimizer, get_param_groups, plan_param_groups
from mtrain.runner import IterBasedRunner


def _optimizers(case):
    """The merged optimizer and mmcv's one-group-per-parameter optimizer, same model."""
    model_cls, lr, wd, paramwise_cfg = CASES[case]
    model = model_cls()
    cfg = dict(type='SGD', lr=lr, momentum=0.9, paramwise_cfg=paramwise_cfg)
    if wd is not None:
        cfg['weight_decay'] = wd
    merged = build_optimizer(model, cfg)
    per_param = torch.optim.SGD(get_param_groups(model, lr, wd, paramwise_cfg, merge=False),
                                **{k: v for k, v in cfg.items()
                                   if k not in ('type', 'paramwise_cfg')})
    return model, merged, per_param


def _per_parameter(optimizer):
    """id(parameter) -> (lr, weight_decay, momentum): what each parameter is stepped with."""
    return {id(p): (g['lr'], g['weight_decay'], g['momentum'])
            for g in optimizer.param_groups for p in g['params']}


@pytest.mark.parametrize('case', list(CASES))
def test_every_parameter_keeps_mmcvs_values_through_a_schedule(case):
    """lr (with a linear warmup), weight decay and momentum at several iterations."""
    _, merged, per_param = _optimizers(case)
    assert len(merged.param_groups) < len(per_param.param_groups)
    runs = []
    for optimizer in (merged, per_param):
        runner = types.SimpleNamespace(optimizer=optimizer, iter=0, epoch=0, max_iters=12,
                                       max_epochs=None, data_loader=[None] * 6)
        hooks = [CosineAnnealingLrUpdaterHook(min_lr_ratio=0.01, by_epoch=False,
                                              warmup='linear', warmup_iters=4, warmup_ratio=0.1),
                 CosineAnnealingMomentumUpdaterHook(min_momentum_ratio=0.5, by_epoch=False)]
        for hook in hooks:
            hook.before_run(runner)
        runs.append((runner, hooks))
    for it in range(12):
        for runner, hooks in runs:
            runner.iter = it
            for hook in hooks:
                hook.before_train_iter(runner)
        if it in (0, 2, 4, 7, 11):  # in the warmup, at its end, and through the cosine
            assert _per_parameter(merged) == _per_parameter(per_param), it


def test_training_steps_are_bit_identical_to_one_group_per_parameter():
    model, merged, per_param = _optimizers('all')
    twin = ExampleModel()
    twin.load_state_dict(model.state_dict())
    per_param = torch.optim.SGD(get_param_groups(twin, 0.01, 1e-4, CASES['all'][3], merge=False),
                                lr=0.01, momentum=0.9, weight_decay=1e-4)
    torch.manual_seed(1)
    for _ in range(3):
        for net, optimizer in ((model, merged), (twin, per_param)):
            torch.manual_seed(2)
            for p in net.parameters():
                p.grad = torch.randn_like(p) if p.requires_grad else None
            optimizer.step()
    for (name, a), b in zip(model.named_parameters(), twin.parameters()):
        assert torch.equal(a, b), name


def test_group_layout_is_deterministic_and_follows_mmcvs_order():
    paramwise_cfg = CASES['all'][3]
    first = get_param_groups(ExampleModel(), 0.01, 1e-4, paramwise_cfg)
    again = get_param_groups(ExampleModel(), 0.01, 1e-4, paramwise_cfg)
    assert [(g['lr'], g['weight_decay'], [p.shape for p in g['params']]) for g in first] == \
        [(g['lr'], g['weight_decay'], [p.shape for p in g['params']]) for g in again]
    plan = plan_param_groups(ExampleModel(), 0.01, 1e-4, paramwise_cfg)
    flat = [p for g in plan.groups for p in g['params']]
    assert [flat[i] for i in plan.position] == [g['params'][0] for g in plan.per_param_groups]


# -- checkpoints written with one group per parameter ------------------------------------
class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = nn.Linear(4, 8)
        self.bn = nn.BatchNorm1d(8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, img, gt_label=None):
        logits = self.fc2(torch.relu(self.bn(self.fc1(img))))
        return {'loss_cls': nn.functional.cross_entropy(logits, gt_label)}


CFG = dict(type='SGD', lr=0.1, momentum=0.9, weight_decay=1e-4,
           paramwise_cfg=dict(bias_lr_mult=2., norm_decay_mult=0.))


def _runner(tmp_path, logger, optimizer_of):
    model = Net()
    runner = IterBasedRunner(model, optimizer=optimizer_of(model), work_dir=str(tmp_path),
                             logger=logger, max_iters=12)
    runner.register_hook(OptimizerHook())
    runner.register_hook(StepLrUpdaterHook(step=[7], by_epoch=False, warmup='linear',
                                           warmup_iters=3))
    return runner


def _old_layout(model):
    """What mtrain built before merging: mmcv's one group per parameter."""
    return torch.optim.SGD(get_param_groups(model, 0.1, 1e-4, CFG['paramwise_cfg'], merge=False),
                           lr=0.1, momentum=0.9, weight_decay=1e-4)


def test_a_per_parameter_checkpoint_resumes_into_merged_groups(tmp_path, logger, toy_loader):
    old = _runner(tmp_path / 'old', logger, _old_layout)
    old._max_iters = 5
    old.run([toy_loader], [('train', 1)])
    ckpt = old.save_checkpoint(str(tmp_path), 'iter_{}.pth')
    assert len(torch.load(ckpt, weights_only=False)['optimizer']['param_groups']) == 6

    results = []
    for build in (_old_layout, lambda model: build_optimizer(model, CFG)):
        runner = _runner(tmp_path / 'resumed', logger, build)
        runner.resume(ckpt)
        runner.run([toy_loader], [('train', 1)])
        results.append(runner)
    old_layout, merged = results
    assert len(merged.optimizer.param_groups) == 3  # weights, biases (2x lr), norm (no decay)
    values = [[_per_parameter(r.optimizer)[id(p)] for p in r.model_wrapper.module.parameters()]
              for r in (old_layout, merged)]
    assert values[0] == values[1]
    for a, b in zip(old_layout.model_wrapper.module.parameters(), merged.model_wrapper.module.parameters()):
        assert torch.equal(a, b)
    states = [[o.state[p]['momentum_buffer'] for p in r.model_wrapper.module.parameters()]
              for r, o in ((old_layout, old_layout.optimizer), (merged, merged.optimizer))]
    assert all(torch.equal(a, b) for a, b in zip(*states))


def test_a_per_parameter_state_with_other_settings_is_refused_with_a_sentence():
    model = Net()
    old = _old_layout(model)
    old.param_groups[0]['lr'] = 0.5  # fc1.weight and bn... now differ from fc2.weight
    state = old.state_dict()
    with pytest.raises(ValueError, match='one param group per parameter.*load_from instead'):
        build_optimizer(model, CFG).load_state_dict(state)
