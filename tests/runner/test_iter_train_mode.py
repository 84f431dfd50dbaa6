"""IterBasedRunner puts the model in train mode before every iteration (mmcv 1.x), cheaply.

The call is skipped only when it would change nothing (every module already
training, none with a ``train`` of its own); these tests change the modes and
the methods mid-run and check each iteration sees what ``model.train()`` gives.
"""

import torch
from torch import nn

from mtrain.hooks import Hook, OptimizerHook

from conftest import ToyModel


class ModeRecorder(Hook):
    """Records every module's ``training`` at each iteration; ``change`` runs after iteration 2."""

    def __init__(self, change=None):
        self.modes, self.change = [], change

    def before_train_iter(self, runner):
        self.modes.append([m.training for m in runner.model.modules()])

    def after_train_iter(self, runner):
        if runner.iter == 2 and self.change is not None:
            self.change(runner)


def _run(make_runner, toy_loader, model, change=None, iters=6):
    runner = make_runner(model=model, by_epoch=False, max_len=iters)
    runner.register_hook(OptimizerHook())
    recorder = ModeRecorder(change)
    runner.register_hook(recorder)
    runner.run([toy_loader], [('train', 1)])
    return recorder.modes


def test_a_model_put_in_eval_mode_by_a_hook_trains_at_the_next_iteration(make_runner,
                                                                         toy_loader):
    modes = _run(make_runner, toy_loader, ToyModel(), lambda runner: runner.model.eval())
    assert all(all(iteration) for iteration in modes) and len(modes) == 6


def test_one_submodule_put_in_eval_mode_trains_at_the_next_iteration(make_runner, toy_loader):
    modes = _run(make_runner, toy_loader, ToyModel(), lambda runner: runner.model.fc2.eval())
    assert all(all(iteration) for iteration in modes)


class FrozenNorm(ToyModel):
    """A model whose own ``train`` keeps a norm layer in eval mode (mmdet's ``norm_eval``)."""

    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm1d(3)
        self.calls = 0

    def train(self, mode=True):
        super().train(mode)
        self.calls += 1
        self.norm.eval()
        return self


def test_a_model_with_its_own_train_is_asked_every_iteration(make_runner, toy_loader):
    model = FrozenNorm()
    modes = _run(make_runner, toy_loader, model)
    assert model.calls >= 6  # once per iteration at least, as mmcv's IterBasedRunner
    norm = [i for i, m in enumerate(model.modules()) if m is model.norm][0]
    assert [iteration[norm] for iteration in modes] == [False] * 6


def test_train_patched_on_an_instance_mid_run_is_called(make_runner, toy_loader):
    model = ToyModel()
    calls = []

    def patch(runner):
        def train(mode=True):
            calls.append(mode)
            return nn.Module.train(model, mode)
        model.train = train

    _run(make_runner, toy_loader, model, patch)
    assert calls == [True] * 3  # iterations 3, 4 and 5


def test_a_module_added_mid_run_in_eval_mode_is_put_in_train_mode(make_runner, toy_loader):
    model = ToyModel()

    def add(runner):
        model.extra = nn.Dropout().eval()

    modes = _run(make_runner, toy_loader, model, add)
    assert model.extra.training and all(all(iteration) for iteration in modes)


def test_a_hole_in_the_module_tree_is_walked_over(make_runner, toy_loader):
    model = ToyModel()
    model.register_module('missing', None)
    modes = _run(make_runner, toy_loader, model, lambda runner: runner.model.fc1.eval())
    assert all(all(iteration) for iteration in modes)


def test_the_check_changes_no_parameter_flag(make_runner, toy_loader):
    model = ToyModel()
    model.fc1.weight.requires_grad_(False)
    _run(make_runner, toy_loader, model)
    assert not model.fc1.weight.requires_grad and torch.is_grad_enabled()
