"""What init_dist reads from torchrun's and Slurm's environments (no processes started)."""

import pytest

from mtrain.utils import init_dist
from mtrain.utils.launch import _backend, first_host, slurm_env, torchrun_env


@pytest.mark.parametrize('nodelist, host', [
    ('node7', 'node7'), ('node1,node2', 'node1'), ('gpu[03-05,9],cpu1', 'gpu03'),
    ('gpu[7]', 'gpu7'), ('rack[2-3]-n[01-04]', 'rack2-n01'), ('a-1,b[1-2]', 'a-1')])
def test_first_host_of_a_slurm_nodelist(nodelist, host):
    assert first_host(nodelist) == host


def test_slurm_env_maps_to_torchrun_variables():
    environ = dict(SLURM_PROCID='5', SLURM_NTASKS='16', SLURM_LOCALID='1',
                   SLURM_NODELIST='gpu[12-19]')
    assert slurm_env(environ, port=28000) == dict(
        RANK='5', WORLD_SIZE='16', LOCAL_RANK='1', MASTER_ADDR='gpu12', MASTER_PORT='28000')
    environ.update(MASTER_ADDR='10.0.0.2', MASTER_PORT='29999')  # set by the user
    env = slurm_env(environ, port=28000)
    assert (env['MASTER_ADDR'], env['MASTER_PORT']) == ('10.0.0.2', '28000')  # port wins (mmcv)
    assert slurm_env(environ, port=None)['MASTER_PORT'] == '29999'  # then the environment
    assert slurm_env(dict(environ, MASTER_PORT=''), None)['MASTER_PORT'] == ''


def test_missing_launcher_variables_say_how_to_start():
    with pytest.raises(RuntimeError, match='RANK, WORLD_SIZE, MASTER_ADDR.*dist_train.sh'):
        torchrun_env({})
    with pytest.raises(RuntimeError, match='SLURM_PROCID.*slurm_train.sh'):
        slurm_env({'SLURM_NTASKS': '2', 'SLURM_NODELIST': 'n1'})
    with pytest.raises(ValueError, match="launcher must be one of \\('pytorch', 'slurm'\\)"):
        init_dist('mpi')


def test_torchrun_env_defaults_local_rank_and_port():
    env = torchrun_env(dict(RANK='1', WORLD_SIZE='2', MASTER_ADDR='h'), port=1234)
    assert env == dict(RANK='1', WORLD_SIZE='2', LOCAL_RANK='0', MASTER_ADDR='h',
                       MASTER_PORT='1234')


def test_backend_defaults_and_nccl_without_cuda(monkeypatch, capsys):
    monkeypatch.setattr('torch.cuda.is_available', lambda: False)
    assert _backend(None) == 'gloo'
    assert _backend('nccl') == 'gloo'  # an mmcv-era config still runs on the CPU
    assert "backend='nccl' needs CUDA, which this machine does not have" in capsys.readouterr().err
    with pytest.raises(ValueError, match="'nccl' \\(GPUs\\) or 'gloo' \\(CPU\\), got 'mpi'"):
        _backend('mpi')
