"""DataContainer, collate and scatter (mmcv.parallel), and the wrappers that unpack them.

Expected batches are mmcv 1.7.2's, from reading ``mmcv/parallel/collate.py``
and ``scatter_gather.py``: one container per field holding a list with one
entry per ``samples_per_gpu`` chunk; stacked tensors padded at the end of
their last ``pad_dims`` dims with ``padding_value``; ``cpu_only`` fields kept
as lists of the samples' values; the wrappers hand the model the first
chunk, tensors on its device, cpu_only fields as per-sample lists.
"""

import pytest
import torch
from torch import nn
from torch.utils.data import Dataset
from torch.utils.data.dataloader import default_collate

from mtrain.datasets import build_dataloader
from mtrain.parallel import (DataContainer as DC, MMDataParallel, ModelWrapper, collate, scatter,
                             scatter_kwargs)
from mtrain.runner import EpochBasedRunner


def _img(h, w, fill=1.0):
    return DC(torch.full((3, h, w), fill), stack=True)


def test_container_properties_and_tensor_only_methods():
    dc = DC(torch.zeros(2, 3), stack=True, padding_value=255, pad_dims=1)
    assert (dc.stack, dc.cpu_only, dc.padding_value, dc.pad_dims) == (True, False, 255, 1)
    assert dc.size() == (2, 3) and dc.size(1) == 3 and dc.dim() == 2 and len(dc) == 2
    assert dc.datatype == 'torch.FloatTensor'
    meta = DC({'a': 1}, cpu_only=True)
    assert meta.datatype is dict and repr(meta) == "DataContainer({'a': 1})"
    with pytest.raises(AttributeError, match='has no attribute size for type'):
        meta.size()
    with pytest.raises(AssertionError):
        DC(torch.zeros(1), pad_dims=4)


def test_stacked_images_are_padded_at_the_end_to_the_largest_and_stacked():
    batch = collate([{'img': _img(4, 5)}, {'img': _img(6, 2, 2.0)}], samples_per_gpu=2)
    img = batch['img']
    assert isinstance(img, DC) and img.stack and not img.cpu_only
    assert len(img.data) == 1 and img.data[0].shape == (2, 3, 6, 5)
    assert torch.all(img.data[0][0, :, :4, :] == 1) and torch.all(img.data[0][0, :, 4:, :] == 0)
    assert torch.all(img.data[0][1, :, :, :2] == 2) and torch.all(img.data[0][1, :, :, 2:] == 0)


def test_padding_value_pad_dims_and_equal_leading_dims():
    segs = [DC(torch.zeros(1, 2, 3, dtype=torch.long), stack=True, padding_value=255),
            DC(torch.zeros(1, 3, 2, dtype=torch.long), stack=True, padding_value=255)]
    out = collate(segs, 2)
    assert out.data[0].shape == (2, 1, 3, 3) and out.data[0][0, 0, 2].tolist() == [255] * 3
    assert out.padding_value == 255
    one = collate([DC(torch.ones(2, 3), stack=True, pad_dims=1),
                   DC(torch.ones(2, 5), stack=True, pad_dims=1)], 2)
    assert one.data[0].shape == (2, 2, 5)
    flat = collate([DC(torch.ones(2), stack=True, pad_dims=None)] * 2, 2)
    assert flat.data[0].shape == (2, 2)
    with pytest.raises(AssertionError, match='differ in dim 0'):
        collate([_img(2, 2), DC(torch.ones(1, 2, 2), stack=True)], 2)


def test_samples_per_gpu_makes_one_entry_per_chunk():
    samples = [{'img': _img(2, 2), 'gt': DC(torch.arange(i + 1)),
                'img_metas': DC({'id': i, 'flip': None}, cpu_only=True)} for i in range(5)]
    batch = collate(samples, samples_per_gpu=2)
    assert [t.shape[0] for t in batch['img'].data] == [2, 2, 1]
    assert [[len(t) for t in chunk] for chunk in batch['gt'].data] == [[1, 2], [3, 4], [5]]
    assert batch['img_metas'].cpu_only
    assert batch['img_metas'].data == [[{'id': 0, 'flip': None}, {'id': 1, 'flip': None}],
                                       [{'id': 2, 'flip': None}, {'id': 3, 'flip': None}],
                                       [{'id': 4, 'flip': None}]]


def test_sequences_are_collated_position_by_position_and_the_rest_by_default_collate():
    samples = [{'img': [torch.ones(2), torch.zeros(2)], 'img_metas': [DC({'i': i}, cpu_only=True)],
                'label': torch.tensor(i), 'name': f's{i}'} for i in range(2)]
    batch = collate(samples, 2)
    assert [t.shape for t in batch['img']] == [(2, 2), (2, 2)]
    assert batch['img_metas'][0].data == [[{'i': 0}, {'i': 1}]]
    assert batch['label'].tolist() == [0, 1] and batch['name'] == ['s0', 's1']


def test_scatter_unpacks_onto_the_cpu_and_pads_kwargs():
    batch = collate([{'img': _img(2, 2), 'img_metas': DC({'i': i}, cpu_only=True),
                      'gt': DC(torch.ones(i + 1))} for i in range(2)], 2)
    (data, ) = scatter(batch, [-1])
    assert data['img'].shape == (2, 3, 2, 2) and data['img_metas'] == [{'i': 0}, {'i': 1}]
    assert [t.shape[0] for t in data['gt']] == [1, 2]
    inputs, kwargs = scatter_kwargs((batch, 'optimizer'), {}, [-1])
    assert inputs[0][1] == 'optimizer' and kwargs == ({}, )
    inputs, kwargs = scatter_kwargs((), dict(x=batch['img'], flag=True), [-1])
    assert inputs == ((), ) and kwargs[0]['flag'] is True and kwargs[0]['x'].shape[0] == 2
    with pytest.raises(TypeError, match='cpu_only=True'):
        scatter(DC([['not a tensor']]), [-1])


class Recorder(nn.Module):
    """An mmcv-contract model that records what reaches it."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 1)
        self.seen = []

    def forward(self, img, img_metas, return_loss=True, **kwargs):
        self.seen.append((img, img_metas))
        return self.fc(img.mean((2, 3)))

    def train_step(self, data_batch, optimizer, **kwargs):
        out = self(**data_batch)
        return dict(loss=out.sum(), log_vars={}, num_samples=len(data_batch['img_metas']))

    val_step = train_step


@pytest.mark.parametrize('wrapper', [MMDataParallel, ModelWrapper])
def test_wrappers_unpack_containers_for_forward_train_step_and_val_step(wrapper):
    batch = collate([{'img': _img(2, 3), 'img_metas': DC({'i': i}, cpu_only=True)}
                     for i in range(2)], 2)
    model = wrapper(Recorder())
    model(return_loss=False, **batch)
    model.train_step(batch, None)
    model.val_step(batch, None)
    seen = model.module.seen
    assert len(seen) == 3
    for img, metas in seen:
        assert isinstance(img, torch.Tensor) and img.shape == (2, 3, 2, 3)
        assert metas == [{'i': 0}, {'i': 1}]  # a list of dicts, not a dict of lists


class MetaDataset(Dataset):
    """The conftest toy data as a 1.x pipeline delivers it: DataContainers and a cpu_only meta."""

    def __init__(self, n=64, wrap=True):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 4, generator=g)
        self.y = (self.x[:, 0] > 0).long() + (self.x[:, 1] > 0.5).long()
        self.wrap = wrap

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        if not self.wrap:
            return {'img': self.x[i], 'gt_label': self.y[i]}
        return {'img': DC(self.x[i], stack=True, pad_dims=None), 'gt_label': self.y[i],
                'img_metas': DC({'index': i, 'ori_shape': None}, cpu_only=True)}


def test_loader_collates_container_samples_as_mmcv_and_plain_ones_as_before():
    loader = build_dataloader(MetaDataset(), samples_per_gpu=4, workers_per_gpu=0, shuffle=False)
    batch = next(iter(loader))
    assert batch['img'].data[0].shape == (4, 4) and batch['gt_label'].tolist() == MetaDataset().y[:4].tolist()
    assert batch['img_metas'].data == [[{'index': i, 'ori_shape': None} for i in range(4)]]
    plain = build_dataloader(MetaDataset(wrap=False), 4, 0, shuffle=False)
    expected = default_collate([MetaDataset(wrap=False)[i] for i in range(4)])
    got = next(iter(plain))
    assert got.keys() == expected.keys()
    assert all(torch.equal(got[k], expected[k]) for k in got)


class MetaModel(nn.Module):
    """The conftest toy model with mmcv's train_step; checks its metas are per-sample dicts."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 3)
        self.indices = []

    def forward(self, img, gt_label, img_metas=None):
        if img_metas is not None:
            self.indices += [meta['index'] for meta in img_metas]
        logits = self.fc2(torch.relu(self.fc1(img)))
        return nn.functional.cross_entropy(logits, gt_label)

    def train_step(self, data_batch, optimizer, **kwargs):
        loss = self(**data_batch)
        return dict(loss=loss, log_vars={'loss': loss.item()}, num_samples=len(data_batch['img']))


def _train(dataset, wrapper, tmp_path, logger):
    model = wrapper(MetaModel())
    runner = EpochBasedRunner(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                              work_dir=str(tmp_path), logger=logger, max_epochs=2)
    runner.register_training_hooks(optimizer_config=dict(grad_clip=None),
                                   log_config=dict(interval=4, hooks=[]))
    runner.run([build_dataloader(dataset, 8, 0, shuffle=True, seed=1)], [('train', 1)])
    return runner.model_wrapper.module


@pytest.mark.parametrize('wrapper', [MMDataParallel, ModelWrapper])
def test_training_on_containers_equals_training_on_plain_tensors(tmp_path, logger, wrapper):
    wrapped = _train(MetaDataset(), wrapper, tmp_path / 'dc', logger)
    plain = _train(MetaDataset(wrap=False), wrapper, tmp_path / 'plain', logger)
    assert sorted(wrapped.indices) == sorted(list(range(64)) * 2)  # every sample's own meta
    for name, value in plain.state_dict().items():
        assert torch.equal(wrapped.state_dict()[name], value), name


def test_num_samples_of_a_container_batch_counts_samples():
    from mtrain.processors import batch_size
    samples = [{'img': _img(2, 2), 'img_metas': DC({'i': i}, cpu_only=True)} for i in range(3)]
    assert batch_size(collate(samples, 3)) == 3
    assert batch_size({'img_metas': collate(samples, 3)['img_metas']}) == 3
    assert batch_size({'gt': collate([DC(torch.ones(2))] * 5, 5)}) == 5


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')
def test_on_a_gpu_stacked_and_listed_tensors_move_and_metas_stay():
    batch = collate([{'img': _img(2, 3), 'img_metas': DC({'i': i}, cpu_only=True),
                      'gt': DC(torch.ones(i + 1))} for i in range(2)], 2)
    inputs, kwargs = MMDataParallel(Recorder(), device_ids=[0]).scatter((batch, 'opt'), {}, [0])
    data, opt = inputs[0]
    assert kwargs == ({}, )
    assert data['img'].device.type == 'cuda' and all(t.is_cuda for t in data['gt'])
    assert data['img_metas'] == [{'i': 0}, {'i': 1}] and opt == 'opt'
    model = MMDataParallel(Recorder(), device_ids=[0])
    model.train_step({k: v for k, v in batch.items() if k != 'gt'}, None)
    img, metas = model.module.seen[0]
    assert img.is_cuda and metas == [{'i': 0}, {'i': 1}]
