"""Exact resume for loaders the user built and handed to ``runner.run`` (issue 26).

Each test trains a reference run, a shorter run that writes a checkpoint mid-pass, and a
run resumed from it, and compares the samples seen after the checkpoint and the final
weights bitwise. A sample's index travels in the batch; the model records what it sees.
"""

import logging

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import (DataLoader, Dataset, DistributedSampler, IterableDataset,
                              RandomSampler, Sampler)

from mtrain.hooks import DistSamplerSeedHook, Hook
from mtrain.parallel import MMDataParallel
from mtrain.runner import EpochBasedRunner, IterBasedRunner

N, BATCH = 64, 8  # 8 batches a pass


class Indexed(Dataset):
    """64 samples whose features encode their index; optionally a random numpy augmentation."""

    def __init__(self, augment: bool = False) -> None:
        self.augment = augment
        self.loaded = 0

    def __len__(self) -> int:
        return N

    def __getitem__(self, i):
        self.loaded += 1
        x = torch.full((4,), i / N)
        noise = float(np.random.rand()) if self.augment else 0.0  # numpy, as 1.x pipelines
        return {'x': x + noise, 'idx': i, 'noise': noise}


class Recorder(nn.Module):
    """mmcv's model contract; records each batch's indices and augmentation draws."""

    def __init__(self, dropout: bool = True) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 1)
        self.dropout = dropout
        self.seen, self.noise = [], []

    def forward(self, x):
        return self.fc(x)

    def train_step(self, data, optimizer):
        self.seen += data['idx'].tolist()
        self.noise += data['noise'].tolist()
        out = self.fc(nn.functional.dropout(data['x'], 0.5) if self.dropout else data['x'])
        loss = (out ** 2).mean()
        return dict(loss=loss, log_vars={'loss': loss.detach()}, num_samples=len(data['idx']))


class NumpyGroupSampler(Sampler):
    """mmdet 2.x's GroupSampler pattern: the order comes from the global numpy RNG."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        return iter(np.random.permutation(self.n).tolist())


class InfiniteBatches(Sampler):
    """mmdet 2.x's InfiniteBatchSampler pattern: one seeded stream made at construction."""

    def __init__(self, n: int, batch: int, seed: int = 0) -> None:
        self.n, self.batch, self.seed = n, batch, seed
        self.indices = self._stream()

    def _stream(self):
        g = torch.Generator().manual_seed(self.seed)
        while True:
            yield from torch.randperm(self.n, generator=g).tolist()

    def __len__(self) -> int:
        return self.n // self.batch

    def __iter__(self):
        buffer = []
        for i in self.indices:
            buffer.append(i)
            if len(buffer) == self.batch:
                yield buffer
                buffer = []


def _loader(kind: str, dataset: Dataset) -> DataLoader:
    if kind == 'shuffle':
        return DataLoader(dataset, batch_size=BATCH, shuffle=True)
    if kind == 'generator':
        return DataLoader(dataset, batch_size=BATCH, shuffle=True,
                          generator=torch.Generator().manual_seed(5))
    if kind == 'sampler_generator':
        sampler = RandomSampler(dataset, generator=torch.Generator().manual_seed(7))
        return DataLoader(dataset, batch_size=BATCH, sampler=sampler)
    if kind == 'set_epoch':
        return DataLoader(dataset, batch_size=BATCH,
                          sampler=DistributedSampler(dataset, num_replicas=1, rank=0, seed=3))
    if kind == 'numpy_sampler':
        return DataLoader(dataset, batch_size=BATCH, sampler=NumpyGroupSampler(N))
    if kind == 'infinite':
        return DataLoader(dataset, batch_sampler=InfiniteBatches(N, BATCH))
    raise ValueError(kind)


class StopAt(Hook):
    """Ends the run after iteration ``n`` (its checkpoint written): a run killed there."""

    def __init__(self, n: int) -> None:
        self.n = n

    def after_train_iter(self, runner) -> None:
        if runner.iter + 1 >= self.n:
            runner.should_stop = True


def _run(work_dir, length, by_epoch=False, resume=None, kind='shuffle', augment=False,
         loader=None, ckpt_interval=12, stop_at=None):
    """One run through the Python API, as 1.x training code does it; returns the model."""
    torch.manual_seed(1)
    np.random.seed(1)
    model = Recorder()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    cls, key = (EpochBasedRunner, 'max_epochs') if by_epoch else (IterBasedRunner, 'max_iters')
    runner = cls(MMDataParallel(model), optimizer=optimizer, work_dir=str(work_dir),
                 logger=logging.getLogger('mtrain.test'), **{key: length})
    runner.register_training_hooks(lr_config=None, optimizer_config=dict(grad_clip=None),
                                   checkpoint_config=dict(interval=ckpt_interval, by_epoch=False),
                                   log_config=None)
    if kind == 'set_epoch' and by_epoch:
        runner.register_hook(DistSamplerSeedHook())  # as mmdet's train_detector does
    if stop_at is not None:
        runner.register_hook(StopAt(stop_at), 'LOWEST')
    if resume is not None:
        runner.resume(str(resume))
    runner.run([loader or _loader(kind, Indexed(augment))], [('train', 1)])
    return model


def _resumed_as_uninterrupted(tmp_path, by_epoch, kind, augment=False, **kw):
    length = 3 if by_epoch else 20  # 24 or 20 iterations; the checkpoint at 12 is mid-pass
    reference = _run(tmp_path / 'ref', length, by_epoch, kind=kind, augment=augment, **kw)
    _run(tmp_path / 'run', length, by_epoch, kind=kind, augment=augment, stop_at=12, **kw)
    resumed = _run(tmp_path / 'res', length, by_epoch, resume=tmp_path / 'run' / 'iter_12.pth',
                   kind=kind, augment=augment, **kw)
    done = 12 * BATCH
    assert resumed.seen == reference.seen[done:]
    assert resumed.noise == reference.noise[done:]
    assert torch.equal(resumed.fc.weight, reference.fc.weight)
    assert torch.equal(resumed.fc.bias, reference.fc.bias)
    return reference, resumed


@pytest.mark.parametrize('by_epoch', [False, True], ids=['IterBasedRunner', 'EpochBasedRunner'])
def test_issue_repro_shuffle_true_resumes_bitwise(tmp_path, by_epoch):
    # The issue's repro: a plain DataLoader(shuffle=True) resumed at iteration 12 (mid-pass).
    _resumed_as_uninterrupted(tmp_path, by_epoch, 'shuffle')


@pytest.mark.parametrize('kind', ['generator', 'sampler_generator', 'set_epoch', 'numpy_sampler'])
@pytest.mark.parametrize('by_epoch', [False, True], ids=['IterBasedRunner', 'EpochBasedRunner'])
def test_samplers_with_their_own_state_resume_bitwise(tmp_path, by_epoch, kind):
    reference, _ = _resumed_as_uninterrupted(tmp_path, by_epoch, kind)
    assert reference.seen[:N] != reference.seen[N:2 * N]  # each pass has its own order


def test_set_epoch_sampler_order_follows_the_epoch_as_mmcv(tmp_path):
    # IterBasedRunner calls set_epoch at each new pass; the resumed pass gets the same epoch.
    reference, _ = _resumed_as_uninterrupted(tmp_path, False, 'set_epoch')
    sampler = DistributedSampler(Indexed(), num_replicas=1, rank=0, seed=3)
    sampler.set_epoch(1)
    assert reference.seen[N:2 * N] == list(sampler)


def test_infinite_batch_sampler_resumes_its_stream(tmp_path):
    _resumed_as_uninterrupted(tmp_path, False, 'infinite')


@pytest.mark.parametrize('by_epoch', [False, True], ids=['IterBasedRunner', 'EpochBasedRunner'])
def test_numpy_augmentation_in_the_main_process_resumes_bitwise(tmp_path, by_epoch):
    _resumed_as_uninterrupted(tmp_path, by_epoch, 'shuffle', augment=True)


@pytest.mark.slow  # worker processes
def test_numpy_augmentation_in_worker_processes_resumes_bitwise(tmp_path):
    # Worker seeds come from the pass start; the consumed batches go through the workers
    # again, so each worker's numpy stream continues where it was.
    def loader():
        return DataLoader(Indexed(augment=True), batch_size=BATCH, shuffle=True, num_workers=2)

    reference = _run(tmp_path / 'ref', 20, loader=loader())
    _run(tmp_path / 'run', 12, loader=loader())
    resumed = _run(tmp_path / 'res', 20, resume=tmp_path / 'run' / 'iter_12.pth', loader=loader())
    assert resumed.seen == reference.seen[12 * BATCH:]
    assert resumed.noise == reference.noise[12 * BATCH:]
    assert torch.equal(resumed.fc.weight, reference.fc.weight)


def test_consumed_samples_are_skipped_without_loading_them(tmp_path):
    _run(tmp_path / 'run', 12, kind='shuffle')
    dataset = Indexed()
    _run(tmp_path / 'res', 14, resume=tmp_path / 'run' / 'iter_12.pth',
         loader=DataLoader(dataset, batch_size=BATCH, shuffle=True))
    assert dataset.loaded == 2 * BATCH  # iterations 13 and 14 only, not the 4 before them


def test_torch_private_surface_used_to_skip_by_index():
    # Pinned: mtrain skips consumed batches by advancing the single-process iterator's
    # _sampler_iter (and counting them in _num_yielded). If torch renames these, this fails.
    dataset = Indexed()
    batches = iter(DataLoader(dataset, batch_size=BATCH))
    next(batches._sampler_iter)
    batches._num_yielded += 1
    assert next(batches)['idx'].tolist() == list(range(BATCH, 2 * BATCH))
    assert dataset.loaded == BATCH and batches._num_yielded == 2


def _warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def _resume_warnings(tmp_path, caplog, make_loader, marker, length=14):
    """The warnings containing ``marker`` of a run resumed at iteration 12 (and its model)."""
    _run(tmp_path / 'run', 12, loader=make_loader())
    with caplog.at_level(logging.WARNING, 'mtrain.test'):
        model = _run(tmp_path / 'res', length, resume=tmp_path / 'run' / 'iter_12.pth',
                     loader=make_loader())
    return [w for w in _warnings(caplog) if marker in w], model


class Stream(IterableDataset):
    def __len__(self) -> int:
        return N

    def __iter__(self):
        for i in torch.randperm(N).tolist():
            yield {'x': torch.full((4,), i / N), 'idx': i, 'noise': 0.0}


def test_iterable_dataset_resume_warns_in_one_line(tmp_path, caplog):
    def loader():
        return DataLoader(Stream(), batch_size=BATCH)

    lines, _ = _resume_warnings(tmp_path, caplog, loader, 'IterableDataset')
    assert len(lines) == 1 and 'the train loader (Stream' in lines[0]


def test_stream_sampler_resumed_in_a_later_pass_warns(tmp_path, caplog):
    # A set_epoch-less sampler whose stream object outlives one pass: its position at a later
    # pass's start is not in any checkpoint.
    class PassStream(InfiniteBatches):
        def __iter__(self):
            for _ in range(len(self)):
                yield [next(self.indices) for _ in range(self.batch)]

    def loader():
        return DataLoader(Indexed(), batch_sampler=PassStream(N, BATCH))

    lines, _ = _resume_warnings(tmp_path, caplog, loader, 'stream (indices)')
    assert len(lines) == 1 and 'PassStream' in lines[0]


@pytest.mark.slow  # worker processes
def test_persistent_workers_resumed_in_a_later_pass_warn_and_keep_the_order(tmp_path, caplog):
    made = []

    def loader():
        made.append(DataLoader(Indexed(), batch_size=BATCH, shuffle=True, num_workers=1,
                               persistent_workers=True))
        return made[-1]

    reference = _run(tmp_path / 'ref', 14, loader=loader())
    lines, resumed = _resume_warnings(tmp_path, caplog, loader, 'worker processes')
    assert resumed.seen == reference.seen[12 * BATCH:]  # the order is still exact
    assert len(lines) == 1 and 'augmentation streams restart' in lines[0]
    # Persistent workers live as long as their loader. Ended here, while their queues are
    # whole: left to a cyclic garbage collection, torch waited 5 s for each (15 s of suite).
    for each in made:
        each._iterator._shutdown_workers()


def test_checkpoint_without_pass_record_warns(tmp_path, caplog):
    _run(tmp_path / 'run', 12)
    path = tmp_path / 'run' / 'iter_12.pth'
    ckpt = torch.load(path, weights_only=True)
    del ckpt['data']  # as written by an older mtrain
    torch.save(ckpt, path)
    with caplog.at_level(logging.WARNING, 'mtrain.test'):
        _run(tmp_path / 'res', 13, resume=path)
    assert any('does not say what ordered its pass' in w for w in _warnings(caplog))


def test_exact_resume_says_nothing(tmp_path, caplog):
    _run(tmp_path / 'run', 12)
    with caplog.at_level(logging.WARNING, 'mtrain.test'):
        _run(tmp_path / 'res', 13, resume=tmp_path / 'run' / 'iter_12.pth')
    assert _warnings(caplog) == []


@pytest.mark.slow  # worker processes
def test_worker_processes_end_with_the_run(tmp_path):
    # A run ending mid-pass let go of its iterator only at a cyclic garbage collection, where
    # torch's shutdown waited 5 s for each worker: 30 s in the middle of a later test.
    import multiprocessing
    before = set(multiprocessing.active_children())  # an earlier test's persistent workers
    _run(tmp_path / 'run', 3, loader=DataLoader(Indexed(), batch_size=BATCH, num_workers=2))
    assert set(multiprocessing.active_children()) - before == set()
