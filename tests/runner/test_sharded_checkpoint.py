"""Sharded checkpoints (DCP) of real FSDP2 runs on gloo ranks: resumed on 2, 1 and 3 ranks,
killed inside a background write, and no rank holding the whole state while it saves.

The toy model, 8 samples a rank an iteration (4 iterations an epoch on 2 ranks), a
checkpoint after every iteration. Each run saves what it trained on and its final weights.
"""

import os
import os.path as osp
import signal
import sys

import pytest
import torch
from torch.distributed.tensor import DTensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

sys.path.insert(0, osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))), 'parallel'))
from dist_launch import launch  # noqa: E402
from mtrain.datasets import build_dataloader  # noqa: E402
from mtrain.hooks import DistSamplerSeedHook, Hook  # noqa: E402
from mtrain.parallel import ModelWrapper, MTFullyShardedDataParallel  # noqa: E402
from mtrain.runner import CheckpointError, EpochBasedRunner, load_checkpoint_file  # noqa: E402
from mtrain.runner.checkpoint import find_latest_valid  # noqa: E402
from mtrain.utils import get_dist_info, get_logger  # noqa: E402

try:
    from torch.distributed.fsdp import fully_shard  # noqa: F401
    HAS_FSDP2 = True
except ImportError:  # torch < 2.6
    HAS_FSDP2 = False

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not HAS_FSDP2, reason='FSDP2: torch >= 2.6')]


class _Record(Hook):
    """Notes each train sample (its first feature); kills the job inside the N-th save's write.

    The kill is armed at ``before_save_checkpoint`` (rank 0) and fires at the
    next ``fsync``: of a shard file or of ``mtrain_state.pth``, before the
    staging folder becomes the checkpoint.
    """

    def __init__(self, kill_in_save=None):
        self.seen, self.kill_in_save, self.saves = [], kill_in_save, 0

    def before_run(self, runner):
        os.makedirs(runner.work_dir, exist_ok=True)
        with open(osp.join(runner.work_dir, f'pid{runner.rank}'), 'w') as f:
            f.write(str(os.getpid()))

    def before_train_iter(self, runner):
        self.seen += [(runner.epoch, v) for v in runner.data_batch['img'][:, 0].tolist()]

    def before_save_checkpoint(self, runner):
        self.saves += 1
        if self.saves == self.kill_in_save:
            real_fsync, work_dir = os.fsync, runner.work_dir

            def fsync_then_die(fd):
                real_fsync(fd)
                for name in os.listdir(work_dir):
                    if name.startswith('pid') and int(name[3:]) != runner.rank:
                        os.kill(int(open(osp.join(work_dir, name)).read()), signal.SIGKILL)
                os.kill(os.getpid(), signal.SIGKILL)

            os.fsync = fsync_then_die


def _train(rank, model_cls, dataset, work_dir, out, resume_from=None, auto_resume=False,
           kill_in_save=None, async_save=False):
    """2 epochs of the toy model: FSDP2 on several ranks, the plain model on one."""
    _, world_size = get_dist_info()
    model = model_cls()
    wrapped = (MTFullyShardedDataParallel(model, shard_layers=['Linear']) if world_size > 1
               else ModelWrapper(model))
    optimizer = torch.optim.SGD(wrapped.parameters(), lr=0.1, momentum=0.9)
    runner = EpochBasedRunner(wrapped, optimizer=optimizer, work_dir=str(work_dir),
                              logger=get_logger(), max_epochs=2)
    runner.register_training_hooks(
        lr_config=dict(policy='step', step=[1], by_epoch=False),  # resumed after the step
        optimizer_config=dict(grad_clip=dict(max_norm=0.5)),
        checkpoint_config=dict(interval=1, by_epoch=False, sharded=True, async_save=async_save))
    runner.register_hook(DistSamplerSeedHook())
    record = _Record(kill_in_save)
    runner.register_hook(record)
    if auto_resume:
        resume_from = find_latest_valid(str(work_dir))
    if resume_from is not None:
        runner.resume(resume_from)
    runner.run([build_dataloader(dataset, 8, 0, shuffle=True, seed=3)], [('train', 1)])
    outcome = {'seen': record.seen, 'num_updates': runner.num_updates}
    if rank == 0:  # the last checkpoint's weights, whole
        outcome['params'] = load_checkpoint_file(osp.join(work_dir, 'latest.pth'),
                                                 keys=['state_dict'])['state_dict']
    torch.save(outcome, osp.join(out, f'rank{rank}.pt'))


def _job(rank, kwargs, *args):
    _train(rank, *args, **kwargs)


def _run(tmp_path, name, world_size, toy, work_dir, **kwargs):
    """Run ``_train`` on ``world_size`` ranks (one: in this process); each rank's outcome.

    ``toy``: the conftest's ``(toy_model, toy_dataset)``.
    """
    out = tmp_path / name
    out.mkdir()
    args = (type(toy[0]), toy[1], work_dir, str(out))
    if world_size == 1:
        _train(0, *args, **kwargs)
    else:
        codes, _ = launch(_job, kwargs, *args, world_size=world_size, timeout=120)
        assert codes == [-9 if kwargs.get('kill_in_save') else 0] * world_size
    return [torch.load(out / f'rank{r}.pt', weights_only=True)
            for r in range(world_size) if osp.exists(out / f'rank{r}.pt')]


def _epoch0_order(dataset):
    """The first features of epoch 0's samples in the sampler's global order."""
    loader = build_dataloader(dataset, 8, 0, shuffle=True, seed=3)
    return [dataset.x[i, 0].item() for i in loader.sampler.global_order()]


def _epoch0(outcome):
    return sorted(v for rank in outcome for epoch, v in rank['seen'] if epoch == 0)


_REFERENCE = {}


@pytest.fixture
def toy(toy_model, toy_dataset):
    return toy_model, toy_dataset


@pytest.fixture
def reference(tmp_path_factory, toy):
    """An uninterrupted 2-rank run, sharded checkpoints written in the background (run once)."""
    if not _REFERENCE:
        tmp = tmp_path_factory.mktemp('reference')
        _REFERENCE['run'] = tmp, _run(tmp, 'out', 2, toy, tmp / 'work', async_save=True)
    return _REFERENCE['run']


def test_killed_in_a_background_write_auto_resumes_bitwise_on_two_ranks(
        tmp_path, toy, reference):
    ref_dir, ref = reference
    work = tmp_path / 'work'
    _run(tmp_path, 'killed', 2, toy, work, async_save=True, kill_in_save=3)
    # The third save was under way: its staging folder is there, the checkpoint is not.
    assert os.readlink(work / 'latest.pth') == 'iter_2.pth' and not osp.exists(work / 'iter_3.pth')
    assert [n for n in os.listdir(work) if n.startswith('.sharded-tmp-')]
    resumed = _run(tmp_path, 'resumed', 2, toy, work, auto_resume=True, async_save=True)
    assert resumed[0]['num_updates'] == ref[0]['num_updates'] == 8
    assert resumed[0]['params'].keys() == ref[0]['params'].keys()
    for name, value in ref[0]['params'].items():
        assert torch.equal(resumed[0]['params'][name], value), name
    for r in (0, 1):  # from iteration 2 on, each rank trained on the same samples
        assert resumed[r]['seen'] == ref[r]['seen'][2 * 8:]
    assert not [n for n in os.listdir(work) if n.startswith('.sharded-tmp-')]
    # Every checkpoint folder is whole (DCP's index and rank 0's file) and reads as a file does.
    ckpt = load_checkpoint_file(str(ref_dir / 'work' / 'iter_8.pth'))
    assert ckpt['progress']['iter'] == 8 and len(ckpt['ranks']) == 2
    assert set(ckpt['optimizer']['state']) == set(ckpt['state_dict'])  # keyed by name


@pytest.mark.parametrize('after, checkpoint', [(1, 3), (3, 1)])
def test_two_rank_checkpoint_resumed_on_another_world_size_sees_each_sample_once(
        tmp_path, toy, reference, after, checkpoint):
    ref_dir, _ = reference
    resumed = _run(tmp_path, 'resumed', after, toy, tmp_path / 'work',
                   resume_from=str(ref_dir / 'work' / f'iter_{checkpoint}.pth'))
    order = _epoch0_order(toy[1])
    expected = order[checkpoint * 16:]  # the rest of the epoch, each sample once
    if after == 3:  # and the padding of any 3-rank epoch of 64, as torch's sampler pads: to 66
        # with the epoch's first 2 samples, then the rest (50) to 51 with its first
        expected += order[:2] + order[checkpoint * 16:][:1]
    assert _epoch0(resumed) == sorted(expected)
    assert all(torch.isfinite(v).all() for v in resumed[0]['params'].values())


def test_one_process_checkpoint_resumed_on_two_ranks_sees_each_sample_once(tmp_path, toy):
    first = _run(tmp_path, 'first', 1, toy, tmp_path / 'one')
    assert len(first[0]['seen']) == 128  # two whole epochs: 16 sharded checkpoints
    resumed = _run(tmp_path, 'resumed', 2, toy, tmp_path / 'two',
                   resume_from=str(tmp_path / 'one' / 'iter_3.pth'))
    assert _epoch0(resumed) == sorted(_epoch0_order(toy[1])[3 * 8:])
    assert all(torch.isfinite(v).all() for v in resumed[0]['params'].values())


# -- no rank holds the whole state while it saves --------------------------------------------
class _NewTensorBytes(TorchDispatchMode):
    """Bytes of the tensors that ops create while it is active (on this thread).

    Every tensor made by an op (an ``empty``, a copy, a collective's output,
    a DTensor's local result) is counted once, at its size; outputs that are
    views of an input's memory are not. The sum is an upper bound of what a
    save holds at its peak: a gather of the whole model (``full_tensor``,
    ``all_gather``) is counted in full.
    """

    def __init__(self):
        super().__init__()
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {_storage(t) for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and _storage(t) not in inputs:
                self.bytes += _storage(t)[1]
        return out


def _storage(t):
    """``(address, bytes)`` of a tensor's memory (a DTensor's: its local shard's)."""
    t = t._local_tensor if isinstance(t, DTensor) else t
    try:
        return t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()
    except RuntimeError:  # no memory of its own (FSDP frees a gathered parameter's)
        return None, 0


def _measured_saves(rank, work_dir, out):
    """One FSDP update of a 2-layer MLP, then three measured saves: whole file, sharded, sharded
    in the background."""
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.Linear(1024, 256))
    wrapped = MTFullyShardedDataParallel(model, shard_layers=['Linear'])
    optimizer = torch.optim.SGD(wrapped.parameters(), lr=0.1, momentum=0.9)
    wrapped.module(torch.randn(8, 256)).square().mean().backward()
    optimizer.step()
    runner = EpochBasedRunner(wrapped, optimizer=optimizer, work_dir=str(work_dir),
                              logger=get_logger(), max_epochs=1)
    measured = {}
    for name, sharded, background in (('whole', False, False), ('sharded', True, False),
                                      ('background', True, True)):
        runner.sharded_checkpoints = sharded
        with _NewTensorBytes() as count:
            runner.gather_checkpoint_state(background=background)
            runner.save_checkpoint(str(work_dir), filename_tmpl=f'{name}.pth',
                                   background=background)
        runner.wait_for_checkpoint()
        measured[name] = count.bytes
    torch.save(measured, osp.join(out, f'rank{rank}.pt'))


def test_no_rank_materialises_the_whole_state_during_a_sharded_save(tmp_path):
    assert launch(_measured_saves, tmp_path / 'work', str(tmp_path), timeout=120)[0] == [0, 0]
    # The whole state: fp32 weights and momentum of 256*1024 + 1024 + 1024*256 + 256 parameters.
    whole = 2 * 4 * (256 * 1024 + 1024 + 1024 * 256 + 256)
    for rank in (0, 1):
        measured = torch.load(tmp_path / f'rank{rank}.pt')
        assert measured['whole'] >= whole  # the control: the gather is seen, in full
        # a sharded save makes no tensor at all (the shards are written where they are); a
        # background one copies this rank's half of the state, nothing more
        assert measured['sharded'] < 0.05 * whole
        assert 0.45 * whole < measured['background'] < 0.55 * whole
    ckpt = load_checkpoint_file(str(tmp_path / 'work' / 'background.pth'))
    assert sum(v.numel() * 4 for v in ckpt['state_dict'].values()) * 2 == whole
    for name in ('whole', 'sharded'):  # the three checkpoints hold the same state
        other = load_checkpoint_file(str(tmp_path / 'work' / f'{name}.pth'))
        for key, value in ckpt['state_dict'].items():
            assert torch.equal(other['state_dict'][key], value), (name, key)


def test_a_sharded_checkpoint_of_another_model_is_refused_in_one_line(tmp_path):
    runners = []
    for out_features in (3, 4):
        model = torch.nn.Linear(3, out_features)
        runners.append(EpochBasedRunner(
            model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), work_dir=str(tmp_path),
            logger=get_logger(), max_epochs=1))
    runners[0].sharded_checkpoints = True
    runners[0].gather_checkpoint_state()
    runners[0].save_checkpoint(str(tmp_path), filename_tmpl='three.pth')
    with pytest.raises(CheckpointError, match=r'three.pth does not fit the model: Size mismatch '
                       r'between saved torch.Size\(\[3, 3\]\) and current: torch.Size\(\[4, 3\]\)'):
        runners[1].resume(str(tmp_path / 'three.pth'))
