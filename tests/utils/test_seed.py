"""set_random_seed as mmcv 1.7.2's, ``use_rank_shift`` included."""

import os.path as osp
import sys

import pytest
import torch

from mtrain.utils import set_random_seed

sys.path.insert(0, osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))), 'parallel'))
from dist_launch import launch  # noqa: E402  (the 2-process launcher of tests/parallel)


def test_the_same_seed_draws_the_same_numbers():
    set_random_seed(3)
    first = torch.rand(3)
    set_random_seed(3, use_rank_shift=True)  # one process: rank 0, no shift
    assert torch.equal(torch.rand(3), first)


def _draw(rank, out_dir):
    set_random_seed(7, use_rank_shift=True)
    torch.save(torch.rand(3), osp.join(out_dir, f'{rank}.pt'))


@pytest.mark.slow
def test_use_rank_shift_seeds_each_rank_with_seed_plus_rank(tmp_path):
    codes, _ = launch(_draw, str(tmp_path))
    assert codes == [0, 0]
    for rank in (0, 1):
        torch.manual_seed(7 + rank)
        assert torch.equal(torch.load(tmp_path / f'{rank}.pt'), torch.rand(3))
