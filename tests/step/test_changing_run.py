"""The step follows what changes during a run: the run's end, the trainable parameters.

Issue 22 items 1 and 2: the accumulation divisor came from a ``max_iters``
stored at ``before_run`` (a resume with a larger global batch divided by 0),
and the parameter list from the parameters trainable at ``before_run``
(unfrozen ones were neither clipped nor checkpointed).
"""

import torch

from mtrain.datasets import build_dataloader
from mtrain.hooks import CheckpointHook, GradientCumulativeOptimizerHook, Hook, OptimizerHook
from mtrain.runner import IterBasedRunner
from mtrain.step import AccumulationWindow


def test_the_window_is_cut_where_the_run_ends_now():
    window = AccumulationWindow(4)
    # 16 iterations planned; resumed at 8 with twice the batch: the run now ends at 12
    assert [window.divisor(i, 12) for i in range(8, 12)] == [4, 4, 4, 4]
    assert [window.ends(i, 12) for i in range(8, 12)] == [False, False, False, True]
    # ends at 10 now: [8, 10) is the last window, divided by 2
    assert [window.divisor(i, 10) for i in (8, 9)] == [2, 2]
    assert [window.ends(i, 10) for i in (8, 9)] == [False, True]
    # an iteration past a stale end still closes its window, never divides by 0
    assert window.divisor(9, 8) == 2 and window.ends(9, 8)
    assert window.divisor(5, None) == 4 and not window.ends(5, None)


def _loader(dataset, batch):
    return build_dataloader(dataset, samples_per_gpu=batch, workers_per_gpu=0, shuffle=False)


def test_resume_with_a_larger_global_batch_divides_by_the_window(make_runner, toy_dataset,
                                                                 tmp_path):
    # 64 samples: 8 iterations an epoch with batches of 8, 4 with batches of 16 (as 1 → 2
    # processes). Epoch 1 ends at iteration 8; epoch 2 is iterations 8-11, one window of 4.
    first = make_runner(max_len=1)
    first.register_hook(GradientCumulativeOptimizerHook(cumulative_iters=4))
    first.register_hook(CheckpointHook(interval=1))
    first.run([_loader(toy_dataset, 8)], [('train', 1)])
    resumed = make_runner(max_len=2)
    resumed.register_hook(GradientCumulativeOptimizerHook(cumulative_iters=4))
    resumed.resume(str(tmp_path / 'epoch_1.pth'))
    start = {n: p.detach().clone() for n, p in resumed.model_wrapper.module.named_parameters()}
    loader = _loader(toy_dataset, 16)
    resumed.run([loader], [('train', 1)])
    assert resumed.num_updates == 3 and resumed.iter == 12
    # by hand: the four batches' losses, each divided by 4, then one SGD step (lr 0.1)
    model = type(resumed.model_wrapper.module)()
    model.load_state_dict(start)
    for batch in loader:
        (model(**batch)['loss_cls'] / 4).backward()
    with torch.no_grad():
        for n, p in model.named_parameters():
            torch.testing.assert_close(resumed.model_wrapper.module.get_parameter(n), p - 0.1 * p.grad,
                                       rtol=0, atol=1e-6)


class Unfreeze(Hook):
    """``fc1`` frozen before the run, unfrozen before iteration ``at``."""

    priority = 'HIGHEST'

    def __init__(self, at):
        self.at = at

    def before_run(self, runner):
        runner.model_wrapper.module.fc1.requires_grad_(runner.iter >= self.at)

    def before_train_iter(self, runner):
        if runner.iter == self.at:
            runner.model_wrapper.module.fc1.requires_grad_(True)


class UpdateSize(Hook):
    """The norm of each update's change of all weights."""

    priority = 'LOWEST'

    def __init__(self):
        self.sizes = []

    def before_train_iter(self, runner):
        self._before = [p.detach().clone() for p in runner.model_wrapper.module.parameters()]

    def after_train_iter(self, runner):
        change = [p.detach() - b for p, b in zip(runner.model_wrapper.module.parameters(), self._before)]
        self.sizes.append(float(torch.linalg.vector_norm(torch.stack(
            [torch.linalg.vector_norm(c) for c in change]))))


def test_parameters_unfrozen_mid_run_are_clipped(make_runner, toy_loader):
    runner = make_runner(by_epoch=False, max_len=4, lr=1.0)  # plain SGD: change = lr * grad
    sizes = UpdateSize()
    for hook in (OptimizerHook(grad_clip=dict(max_norm=0.01)), Unfreeze(at=2), sizes):
        runner.register_hook(hook)
    runner.run([toy_loader], [('train', 1)])
    assert runner.model_wrapper.module.fc1.weight.requires_grad
    assert max(sizes.sizes) <= 0.01 * (1 + 1e-5), sizes.sizes


def _weights(runner):
    return {n: p.detach().clone() for n, p in runner.model_wrapper.module.named_parameters()}


def test_half_accumulated_grads_of_unfrozen_parameters_are_checkpointed(make_runner, toy_loader,
                                                                        tmp_path):
    def runner_with(*hooks):
        runner = make_runner(by_epoch=False, max_len=7, momentum=0.9)
        for hook in (GradientCumulativeOptimizerHook(cumulative_iters=3), Unfreeze(at=1),
                     *hooks):
            runner.register_hook(hook)
        return runner

    full = runner_with(CheckpointHook(interval=4, by_epoch=False))  # iter_4: inside [3, 6)
    full.run([toy_loader], [('train', 1)])
    grads = torch.load(tmp_path / 'iter_4.pth', weights_only=True)['hooks'][
        'GradientCumulativeOptimizerHook']['grads']
    assert set(grads) == {'fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias'}
    resumed = runner_with()
    resumed.resume(str(tmp_path / 'iter_4.pth'))
    resumed.run([toy_loader], [('train', 1)])
    for name, value in _weights(full).items():
        assert torch.equal(value, _weights(resumed)[name]), name


class AddGroup(Hook):
    """``fc1`` outside the optimizer (and frozen) until iteration ``at``, then a new param group."""

    priority = 'HIGHEST'

    def __init__(self, at):
        self.at = at

    def before_run(self, runner):
        runner.model_wrapper.module.fc1.requires_grad_(False)

    def before_train_iter(self, runner):
        if runner.iter == self.at:
            fc1 = runner.model_wrapper.module.fc1.requires_grad_(True)
            runner.optimizer.add_param_group({'params': list(fc1.parameters()), 'lr': 1.0})


def test_a_param_group_added_mid_run_is_clipped_and_stepped(toy_model, toy_loader, tmp_path,
                                                           logger):
    optimizer = torch.optim.SGD(toy_model.fc2.parameters(), lr=1.0)
    runner = IterBasedRunner(toy_model, optimizer=optimizer, work_dir=str(tmp_path),
                             logger=logger, max_iters=4)
    sizes = UpdateSize()
    for hook in (OptimizerHook(grad_clip=dict(max_norm=0.01)), AddGroup(at=2), sizes):
        runner.register_hook(hook)
    start = toy_model.fc1.weight.detach().clone()
    runner.run([toy_loader], [('train', 1)])
    assert not torch.equal(toy_model.fc1.weight, start)  # the new group was stepped
    assert max(sizes.sizes) <= 0.01 * (1 + 1e-5), sizes.sizes


class SwitchOptimizer(Hook):
    """Replace ``runner.optimizer`` before iteration ``at`` (an optimizer-switching schedule)."""

    priority = 'HIGHEST'

    def __init__(self, at):
        self.at = at

    def before_train_iter(self, runner):
        if runner.iter == self.at:
            runner.optimizer = torch.optim.SGD(runner.model_wrapper.module.parameters(), lr=0.0)


def test_an_optimizer_replaced_mid_run_is_the_one_stepped(make_runner, toy_loader):
    runner = make_runner(by_epoch=False, max_len=4, lr=0.1)
    sizes = UpdateSize()
    for hook in (OptimizerHook(grad_clip=dict(max_norm=1.0)), SwitchOptimizer(at=2), sizes):
        runner.register_hook(hook)
    runner.run([toy_loader], [('train', 1)])
    assert sizes.sizes[0] > 0 and sizes.sizes[2:] == [0.0, 0.0]  # lr 0 from iteration 2 on
