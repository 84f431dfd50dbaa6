"""nan_policy: stop names the iteration and writes no NaN checkpoint; skip leaves weights alone."""

import os

import pytest
import torch

from mtrain.hooks import CheckpointHook, Hook, NanGuardHook, NonFiniteLossError, OptimizerHook


class PoisonLoss(Hook):
    """Make the loss of chosen (1-based) iterations NaN, after the forward."""

    priority = 'VERY_HIGH'

    def __init__(self, bad_iters):
        self.bad_iters = set(bad_iters)

    def after_train_iter(self, runner):
        if runner.iter + 1 in self.bad_iters:
            runner.outputs['loss'] = runner.outputs['loss'] * float('nan')
            runner.outputs['log_vars'] = dict(runner.outputs['log_vars'],
                                              loss=runner.outputs['loss'].detach())


def test_stop_names_the_first_bad_iteration_and_loss_terms(make_runner, toy_loader):
    runner = make_runner(by_epoch=False, max_len=30)
    runner.register_hook(OptimizerHook())
    runner.register_hook(NanGuardHook(action='stop', interval=10))
    runner.register_hook(PoisonLoss([13, 15]))
    with pytest.raises(NonFiniteLossError, match='iteration 13 ') as err:
        runner.run([toy_loader], [('train', 1)])
    assert 'loss=nan' in str(err.value) and 'loss_cls=' in str(err.value)
    assert runner.iter == 19  # detected at the check after iteration 20, no later


def test_stop_vetoes_a_checkpoint_of_nan_weights(make_runner, toy_loader, tmp_path):
    runner = make_runner(by_epoch=False, max_len=30)
    runner.register_hook(OptimizerHook())
    runner.register_hook(NanGuardHook(action='stop', interval=100))
    runner.register_hook(CheckpointHook(interval=5, by_epoch=False))
    runner.register_hook(PoisonLoss([7]))
    with pytest.raises(NonFiniteLossError, match='iteration 7 '):
        runner.run([toy_loader], [('train', 1)])
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith('iter_')) == ['iter_5.pth']


def test_skip_leaves_parameters_and_update_count_unchanged(make_runner, toy_loader):
    runner = make_runner(by_epoch=False, max_len=6, momentum=0.9)
    runner.register_hook(OptimizerHook())
    runner.register_hook(NanGuardHook(action='skip'))
    runner.register_hook(PoisonLoss([4, 5]))
    snapshots = {}

    class Snap(Hook):
        priority = 'LOWEST'

        def after_train_iter(self, runner):
            snapshots[runner.iter + 1] = [p.detach().clone() for p in runner.model.parameters()]

    runner.register_hook(Snap())
    runner.run([toy_loader], [('train', 1)])
    assert runner.num_updates == 4
    for a, b in zip(snapshots[3], snapshots[5]):
        assert torch.equal(a, b)
    assert all(torch.isfinite(p).all() for p in runner.model.parameters())
    runner.log_buffer.average()
    assert runner.log_buffer.output['skipped_steps'] > 0


def test_bad_policy_is_a_clear_error():
    with pytest.raises(ValueError, match="'stop' or 'skip'"):
        NanGuardHook(action='ignore')
