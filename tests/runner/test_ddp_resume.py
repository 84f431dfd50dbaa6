"""Real 2-process gloo runs: preemption agreed by all ranks, resume on 2, 1 → 2 and 2 → 1
processes, and logged values reduced by name."""

import os
import os.path as osp
import signal
import sys

import pytest
import torch

sys.path.insert(0, osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))), 'parallel'))
from dist_launch import launch  # noqa: E402
from mtrain.datasets import build_dataloader  # noqa: E402
from mtrain.hooks import DistSamplerSeedHook, Hook  # noqa: E402
from mtrain.parallel import ModelWrapper, MTDistributedDataParallel  # noqa: E402
from mtrain.runner import EpochBasedRunner, LogBuffer, Preempted  # noqa: E402
from mtrain.utils import get_dist_info, get_logger  # noqa: E402
from mtrain.utils.dist import sum_by_key  # noqa: E402

pytestmark = pytest.mark.slow


class _Record(Hook):
    """Notes each train sample (by its first feature) and, on one rank, sends a signal."""

    def __init__(self, signal_at=None):
        self.seen, self.signal_at = [], signal_at

    def before_train_iter(self, runner):
        self.seen += runner.data_batch['img'][:, 0].tolist()

    def after_train_iter(self, runner):
        if runner.iter + 1 == self.signal_at and runner.rank == runner.world_size - 1:
            os.kill(os.getpid(), signal.SIGTERM)


def _train(model_cls, dataset, work_dir, out, resume_from=None, signal_at=None, max_epochs=2):
    """The toy model, 8 samples per process, a checkpoint every iteration; saves the outcome."""
    rank, world_size = get_dist_info()
    model = model_cls()
    wrapped = MTDistributedDataParallel(model) if world_size > 1 else ModelWrapper(model)
    runner = EpochBasedRunner(wrapped, optimizer=torch.optim.SGD(wrapped.parameters(), lr=0.1,
                                                                 momentum=0.9),
                              work_dir=str(work_dir), logger=get_logger(), max_epochs=max_epochs)
    runner.register_training_hooks(lr_config=dict(policy='step', step=[1], by_epoch=False),
                                   optimizer_config=dict(),
                                   checkpoint_config=dict(interval=1, by_epoch=False))
    runner.register_hook(DistSamplerSeedHook())
    record = _Record(signal_at)
    runner.register_hook(record)
    if resume_from is not None:
        runner.resume(resume_from)
    runner.stop_on_signals(check_interval=2)
    stopped = None
    try:
        runner.run([build_dataloader(dataset, 8, 0, shuffle=True, seed=3)], [('train', 1)])
    except Preempted as e:
        stopped = e.iteration
    torch.save({'params': {k: v.clone() for k, v in model.state_dict().items()},
                'seen': record.seen, 'stopped': stopped, 'iter': runner.iter,
                'num_updates': runner.num_updates, 'lr': runner.current_lr()},
               osp.join(out, f'rank{rank}.pt'))


def _job(rank, kwargs, *args):
    _train(*args, **kwargs)


def _outcome(out, world_size):
    return [torch.load(osp.join(out, f'rank{r}.pt'), weights_only=True) for r in range(world_size)]


def _run(tmp_path, name, world_size, model_cls, dataset, work_dir, **kwargs):
    out = tmp_path / name
    out.mkdir()
    if world_size == 1:
        _train(model_cls, dataset, work_dir, str(out), **kwargs)
    else:
        codes, _ = launch(_job, kwargs, model_cls, dataset, work_dir, str(out), timeout=300)
        assert codes == [0, 0]
    return _outcome(out, world_size)


def _epoch0_order(dataset):
    """The first features of epoch 0's samples in the sampler's global order."""
    loader = build_dataloader(dataset, 8, 0, shuffle=True, seed=3)
    return [dataset.x[i, 0].item() for i in loader.sampler.global_order()]


def test_preempted_ranks_stop_together_and_resume_bitwise_on_two(tmp_path, toy_model,
                                                                 toy_dataset):
    model_cls = type(toy_model)
    full = _run(tmp_path, 'full', 2, model_cls, toy_dataset, tmp_path / 'full_dir')
    stopped = _run(tmp_path, 'stopped', 2, model_cls, toy_dataset, tmp_path / 'run', signal_at=1)
    # Only rank 1 got SIGTERM, after iteration 1: both agree at iteration 2, one checkpoint.
    assert [o['stopped'] for o in stopped] == [2, 2]
    assert torch.load(tmp_path / 'run' / 'iter_2.pth', weights_only=True)['progress']['iter'] == 2
    resumed = _run(tmp_path, 'resumed', 2, model_cls, toy_dataset, tmp_path / 'run',
                   resume_from=str(tmp_path / 'run' / 'iter_2.pth'))
    for a, b in zip(full, resumed):
        assert a.keys() == b.keys() and a['num_updates'] == b['num_updates'] == 8
        for k in a['params']:
            assert torch.equal(a['params'][k], b['params'][k]), k


@pytest.mark.parametrize('before,after,stop_at', [(2, 1, 1), (1, 2, 3)])
def test_resume_on_another_world_size_continues_at_the_exact_sample(
        tmp_path, toy_model, toy_dataset, before, after, stop_at):
    model_cls, order = type(toy_model), _epoch0_order(toy_dataset)
    _run(tmp_path, 'first', before, model_cls, toy_dataset, tmp_path / 'run',
                 max_epochs=1, signal_at=None if before == 1 else stop_at)
    ckpt = tmp_path / 'run' / f'iter_{stop_at}.pth'
    resumed = _run(tmp_path, 'resumed', after, model_cls, toy_dataset, tmp_path / 'run',
                   resume_from=str(ckpt), max_epochs=1)
    consumed = stop_at * 8 * before
    seen = sorted(v for o in resumed for v in o['seen'])
    assert seen == sorted(order[consumed:])  # the rest of the epoch, each sample once
    # The schedule continues from the checkpoint's update count (step at update 1).
    updates = torch.load(ckpt, weights_only=True)['progress']['num_updates']
    assert updates == stop_at and resumed[0]['lr'] == [pytest.approx(0.01)]
    assert resumed[0]['num_updates'] == updates + -(-(64 - consumed) // (8 * after))


def _log_job(rank, out):
    buf = LogBuffer()
    buf.update({'low.loss': torch.tensor(1.0)} if rank == 0 else {'high.loss': torch.tensor(5.0)})
    buf.update({'loss': torch.tensor(float(rank))})
    buf.average(sum_by_key)
    torch.save(buf.output, osp.join(out, f'rank{rank}.pt'))


def test_logged_values_are_averaged_over_ranks_by_name(tmp_path):
    codes, _ = launch(_log_job, str(tmp_path), timeout=300)
    assert codes == [0, 0]
    for r in (0, 1):
        assert torch.load(tmp_path / f'rank{r}.pt') == {'low.loss': 1.0, 'high.loss': 5.0,
                                                        'loss': 0.5}
