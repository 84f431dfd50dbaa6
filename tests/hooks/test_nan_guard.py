"""nan_policy: stop names the iteration and writes no NaN checkpoint; skip leaves weights alone."""

import logging
import os
import os.path as osp
import sys

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from mtrain.datasets import build_dataloader
from mtrain.hooks import (CheckpointHook, Hook, NanGuardHook, NonFiniteLossError, OptimizerHook,
                          TextLoggerHook)
from mtrain.parallel import MTDistributedDataParallel
from mtrain.runner import IterBasedRunner
from mtrain.utils import get_dist_info, get_logger

sys.path.insert(0, osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))), 'parallel'))
from dist_launch import launch  # noqa: E402  (the 2-process launcher of tests/parallel)


#: The tests of the device-side skip need fused optimizers on the CPU (tests/conftest.py).
needs_cpu_fused = pytest.mark.usefixtures('cpu_fused')


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


class NanModel(nn.Module):
    """The toy model whose loss is NaN at chosen (1-based) iterations: what the log
    buffer and the guard both see, as with a real divergence."""

    def __init__(self, net, bad_iters):
        super().__init__()
        self.net, self.bad_iters, self.calls = net, set(bad_iters), 0

    def forward(self, img, gt_label=None):
        output = self.net(img, gt_label)
        if self.training:
            self.calls += 1
            if self.calls in self.bad_iters:
                output['loss_cls'] = output['loss_cls'] * float('nan')
        return output


class _CountIsfinite(torch.overrides.TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls += func is torch.isfinite
        return func(*args, **(kwargs or {}))


def test_stop_rides_on_the_log_line_and_looks_at_no_tensor_itself(make_runner, toy_model,
                                                                   toy_loader):
    """With a log line every interval the guard's check is free: no isfinite, no read of its own."""
    runner = make_runner(model=NanModel(toy_model, []), by_epoch=False, max_len=20)
    runner.register_hook(OptimizerHook())
    runner.register_hook(NanGuardHook(action='stop', interval=5))
    runner.register_hook(TextLoggerHook(interval=5, by_epoch=False), 'VERY_LOW')
    with _CountIsfinite() as mode:
        runner.run([toy_loader], [('train', 1)])
    assert mode.calls == 0 and runner.iter == 20


@pytest.mark.parametrize('log_interval', [5, 7, None])
def test_stop_at_a_log_line_or_its_own_check_names_the_iteration(make_runner, toy_model,
                                                                  toy_loader, log_interval):
    runner = make_runner(model=NanModel(toy_model, [13]), by_epoch=False, max_len=30)
    runner.register_hook(OptimizerHook())
    runner.register_hook(NanGuardHook(action='stop', interval=5))
    if log_interval:
        runner.register_hook(TextLoggerHook(interval=log_interval, by_epoch=False), 'VERY_LOW')
    with pytest.raises(NonFiniteLossError, match='at iteration 13 .*loss_cls=nan'):
        runner.run([toy_loader], [('train', 1)])
    # Stopped at the first log line or check after it: 14 (a line every 7), else 15.
    assert runner.iter + 1 == (14 if log_interval == 7 else 15)


def test_a_log_line_whose_sum_over_ranks_is_not_finite_stops_every_rank(make_runner):
    """This rank's losses are finite, another's were not: the summed line says so."""
    runner = make_runner(max_len=1)
    guard = NanGuardHook(action='stop', interval=5)
    runner.register_hook(guard)
    runner.mode = 'train'
    guard.before_run(runner)
    runner.log_buffer.update({'loss': torch.tensor(1.0)})
    guard._pending = [{'loss': torch.tensor(1.0)}]
    with pytest.raises(NonFiniteLossError, match='not finite on another rank'):
        runner.log_buffer.average(lambda totals: {k: (float('nan'), c)
                                                  for k, (_, c) in totals.items()})


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


class UpdateRecorder(Hook):
    priority = 'LOWEST'  # after the logger: sees what a log line corrected

    def __init__(self):
        self.updates = []

    def after_train_iter(self, runner):
        self.updates.append(runner.num_updates)


@needs_cpu_fused
def test_device_side_skips_are_counted_at_the_next_log_line(toy_model, toy_loader, tmp_path,
                                                            logger, caplog):
    # A fused optimizer skips on the device: the host counts each step as an update until
    # the log line (every 4 iterations) reads the skips back; the end of the run settles too.
    optimizer = torch.optim.SGD(toy_model.parameters(), lr=0.1, momentum=0.9, fused=True)
    runner = IterBasedRunner(toy_model, optimizer=optimizer, work_dir=str(tmp_path),
                             logger=logger, max_iters=10)
    runner.register_hook(OptimizerHook())
    guard = NanGuardHook(action='skip')
    runner.register_hook(guard)
    runner.register_hook(TextLoggerHook(interval=4, by_epoch=False), 'VERY_LOW')
    runner.register_hook(PoisonLoss([6, 7, 10]))
    record = UpdateRecorder()
    runner.register_hook(record)
    with caplog.at_level(logging.INFO, logger=logger.name):
        runner.run([toy_loader], [('train', 1)])
    assert record.updates == [1, 2, 3, 4, 5, 6, 7, 6, 7, 8]  # corrected at iteration 8
    assert runner.num_updates == 7 and guard.skipped == 3  # and at the end of the run
    messages = [r.message for r in caplog.records]
    warnings = [m for m in messages if 'skipped since the last log line' in m]
    assert len(warnings) == 2
    assert warnings[0].startswith('2 step(s) skipped since the last log line: the loss was not '
                                  'finite') and 'update count corrected to 6' in warnings[0]
    assert warnings[1].startswith('1 step(s) ') and '3 skipped so far' in warnings[1]
    assert not any('the step was skipped' in m for m in messages)  # no warning per step
    assert any('[8]' in m and 'skipped_steps: 2.0000' in m for m in messages)  # the line


class _PoisonOnRank(Hook):
    """Make the loss NaN on one rank at one (1-based) iteration, after the forward."""

    priority = 'VERY_HIGH'

    def __init__(self, rank, iteration):
        self.rank, self.iteration = rank, iteration

    def after_train_iter(self, runner):
        if runner.rank == self.rank and runner.iter + 1 == self.iteration:
            runner.outputs['loss'] = runner.outputs['loss'] * float('nan')


class _Regression(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 1)

    def forward(self, x, y):
        return {'loss': (self.fc(x) - y).pow(2).mean()}


def _fused_skip_job(rank, out_dir):
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(32, 4, generator=g), torch.randn(32, 1, generator=g))
    model = MTDistributedDataParallel(_Regression())
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1, fused=True)
    runner = IterBasedRunner(model, optimizer=optimizer, logger=get_logger(), max_iters=6)
    runner.register_training_hooks(optimizer_config={})
    guard = NanGuardHook(action='skip')
    runner.register_hook(guard)
    runner.register_hook(_PoisonOnRank(rank=1, iteration=3))
    runner.run([build_dataloader(data, 4, 0, shuffle=True, seed=1)], [('train', 1)])
    state = {f'{i}.{k}': v for i, p in enumerate(model.parameters())
             for k, v in optimizer.state[p].items()}
    torch.save(dict(params=dict(model.module.state_dict()), state=state, skipped=guard.skipped,
                    updates=runner.num_updates, world_size=get_dist_info()[1]),
               os.path.join(out_dir, f'rank{rank}.pt'))


class _NanLossOnRank(_Regression):
    """A loss term that is NaN on one rank at one call but carries no gradient: the
    weights stay finite on every rank, only that rank's loss value is not."""

    def __init__(self, rank, call):
        super().__init__()
        self.rank, self.call, self.calls = rank, call, 0

    def forward(self, x, y):
        self.calls += 1
        bad = get_dist_info()[0] == self.rank and self.calls == self.call
        return dict(super().forward(x, y), loss_probe=torch.tensor(float('nan') if bad else 0.))


def _stop_job(rank, out_dir):
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(32, 4, generator=g), torch.randn(32, 1, generator=g))
    model = MTDistributedDataParallel(_NanLossOnRank(rank=1, call=3))
    runner = IterBasedRunner(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                             logger=get_logger(), max_iters=12)
    runner.register_training_hooks(optimizer_config={})
    runner.register_hook(NanGuardHook(action='stop', interval=4))
    runner.register_hook(TextLoggerHook(interval=4, by_epoch=False), 'VERY_LOW')
    try:
        runner.run([build_dataloader(data, 4, 0, shuffle=True, seed=1)], [('train', 1)])
        message = None
    except NonFiniteLossError as err:
        message = str(err)
    torch.save(dict(message=message, iteration=runner.iter + 1),
               os.path.join(out_dir, f'rank{rank}.pt'))


@pytest.mark.slow
def test_stop_at_a_log_line_stops_every_rank_together(tmp_path):
    """A NaN loss on rank 1 only: the log line's sum over the ranks is NaN on both, so both
    stop there, rank 1 naming the iteration, rank 0 saying it was another rank."""
    codes, _ = launch(_stop_job, str(tmp_path), timeout=60)
    assert codes == [0, 0]
    r0, r1 = (torch.load(tmp_path / f'rank{r}.pt', weights_only=True) for r in (0, 1))
    assert r0['iteration'] == r1['iteration'] == 4  # the log line after iteration 3
    assert 'at iteration 3 ' in r1['message'] and 'loss_probe=nan' in r1['message']
    assert 'not finite on another rank, at or before iteration 4' in r0['message']


@needs_cpu_fused
@pytest.mark.slow
def test_a_device_side_skip_on_one_rank_skips_on_every_rank(tmp_path):
    codes, _ = launch(_fused_skip_job, str(tmp_path), timeout=60)
    assert codes == [0, 0]
    r0, r1 = (torch.load(tmp_path / f'rank{r}.pt', weights_only=True) for r in (0, 1))
    assert r0['world_size'] == 2
    assert r0['skipped'] == r1['skipped'] == 1 and r0['updates'] == r1['updates'] == 5
    assert r0['state']['0.step'] == 5  # the fused kernels took the skipped step back
    for key in ('params', 'state'):
        for name, value in r0[key].items():
            assert torch.equal(value, r1[key][name]), name
            assert torch.isfinite(value).all()


def test_bad_policy_is_a_clear_error():
    with pytest.raises(ValueError, match="'stop' or 'skip'"):
        NanGuardHook(action='ignore')


@needs_cpu_fused
def test_ema_after_a_late_correction_averages_every_real_update(tmp_path, logger, toy_model,
                                                                toy_loader):
    """A device-side skip is an update to EMA until the log line takes it off
    ``num_updates`` (documented); from then on every real update is averaged, none
    missed although the count went back."""
    from mtrain.hooks import EMAHook

    class CountingEMA(EMAHook):
        def after_train_iter(self, runner):
            before = self._seen_updates
            super().after_train_iter(runner)
            if self._seen_updates != before:
                averaged.append(runner.iter + 1)

    averaged = []
    model = toy_model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, fused=True)
    runner = IterBasedRunner(model, optimizer=optimizer, work_dir=str(tmp_path),
                             logger=logger, max_iters=12)
    runner.register_hook(OptimizerHook())
    runner.register_hook(NanGuardHook(action='skip'))
    runner.register_hook(TextLoggerHook(interval=4, by_epoch=False), 'VERY_LOW')
    runner.register_hook(PoisonLoss([6]))
    runner.register_hook(CountingEMA(momentum=0.5, warm_up=0))
    runner.run([toy_loader], [('train', 1)])
    assert runner.num_updates == 11
    # 6 while unknown; 9 just after the count went back by one (to where it was at 8)
    assert averaged == list(range(1, 13))


@pytest.mark.parametrize('fused', [False, True])
def test_skip_on_a_gpu_says_how_to_skip_without_a_sync(make_runner, caplog, request, fused):
    if fused:
        request.getfixturevalue('cpu_fused')
    runner = make_runner()
    runner.optimizer = torch.optim.SGD(runner.model.parameters(), lr=0.1,
                                       **(dict(fused=True) if fused else {}))
    runner.register_hook(OptimizerHook())
    runner.device = torch.device('cuda')  # what the message depends on (no GPU needed here)
    with caplog.at_level(logging.INFO, logger=runner.logger.name):
        NanGuardHook(action='skip').before_run(runner)
    said = [r.message for r in caplog.records if 'fused=True' in r.message]
    assert len(said) == (0 if fused else 1)
    if said:
        assert "optimizer=dict(type='SGD', ..., fused=True)" in said[0]


class ShortenRun(Hook):
    """Cut the run to ``new_end`` iterations at iteration ``at`` (a run-length change mid-run)."""

    def __init__(self, at, new_end):
        self.at, self.new_end = at, new_end

    def after_train_iter(self, runner):
        if runner.iter + 1 == self.at:
            runner._max_iters = self.new_end


@pytest.mark.parametrize('new_end', [14, 25])
def test_stop_checks_the_last_interval_of_a_run_whose_length_changed(make_runner, toy_loader,
                                                                      new_end):
    """The final check follows the run's length as it is, not as it was at the start."""
    runner = make_runner(by_epoch=False, max_len=20)
    runner.register_hook(OptimizerHook())
    runner.register_hook(NanGuardHook(action='stop', interval=10))
    runner.register_hook(ShortenRun(at=5, new_end=new_end))
    runner.register_hook(PoisonLoss([12]))
    with pytest.raises(NonFiniteLossError, match='iteration 12 '):
        runner.run([toy_loader], [('train', 1)])
    assert runner.iter == min(new_end, 20) - 1  # checked after the new last iteration
