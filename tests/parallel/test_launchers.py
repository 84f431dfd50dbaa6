"""``init_dist('slurm')`` from srun's variables, and the collectives mtrain adds."""

import os

import pytest
import torch

from dist_launch import free_port, launch
from mtrain.utils import all_reduce_mean, broadcast_object, destroy_dist, init_dist

pytestmark = pytest.mark.slow


def _slurm_job(rank, port, out_dir):
    # What srun sets for task `rank` of 2 on one node (torchrun's variables are not set).
    for key in ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'MASTER_ADDR', 'MASTER_PORT'):
        os.environ.pop(key, None)
    os.environ.update(SLURM_PROCID=str(rank), SLURM_NTASKS='2', SLURM_LOCALID=str(rank),
                      SLURM_NODELIST='localhost')
    assert init_dist('slurm', port=port) == (rank, 2)
    mean = all_reduce_mean(torch.tensor([1.0 + rank, 10.0 * rank], dtype=torch.float64))
    seed = broadcast_object(1234 if rank == 0 else None)
    torch.save({'mean': mean, 'seed': seed, 'env': os.environ['MASTER_ADDR']},
               os.path.join(out_dir, f'rank{rank}.pt'))
    destroy_dist()


def test_slurm_launcher_joins_the_group_from_slurm_variables(tmp_path):
    codes, _ = launch(_slurm_job, free_port(), str(tmp_path), init=False)
    assert codes == [0, 0]
    for rank in (0, 1):
        result = torch.load(tmp_path / f'rank{rank}.pt', weights_only=True)
        assert result['mean'].tolist() == [1.5, 5.0] and result['mean'].dtype == torch.float64
        assert result['seed'] == 1234 and result['env'] == 'localhost'
