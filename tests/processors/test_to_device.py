"""Moving batches to the run's device and counting their samples."""

from collections import namedtuple

import torch

from mtrain.processors.to_device import batch_size, to_device

CPU = torch.device('cpu')


def test_a_dict_batch_already_on_the_device_is_returned_as_it_is():
    batch = {'img': torch.zeros(4, 3), 'gt_label': torch.zeros(4, dtype=torch.long)}
    assert to_device(batch, CPU) is batch  # nothing to move: no new dict, no .to() calls


def test_nested_and_non_tensor_entries_keep_their_structure():
    Pair = namedtuple('Pair', 'a b')
    batch = {'img': torch.ones(2, 3), 'meta': [{'name': 'x'}, {'name': 'y'}],
             'pair': Pair(torch.zeros(2), 5), 'scale': 0.5}
    moved = to_device(batch, CPU)
    assert moved is not batch and moved['meta'] == batch['meta'] and moved['scale'] == 0.5
    assert isinstance(moved['pair'], Pair) and moved['pair'].b == 5
    assert moved['img'] is batch['img']  # a tensor on the device is not copied


def test_batch_size_is_the_leading_dimension_of_the_first_tensor():
    assert batch_size({'img': torch.zeros(7, 3), 'gt_label': torch.zeros(7)}) == 7
    assert batch_size(({'name': 'x'}, torch.zeros(5, 2))) == 5
    assert batch_size(torch.tensor(3.)) == 1 and batch_size({'name': 'x'}) == 1
