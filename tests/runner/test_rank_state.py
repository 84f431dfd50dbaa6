"""Which rank's random state a resumed rank restores, and the line said when it is not exact."""

import logging

import pytest
import torch

from mtrain.hooks import CheckpointHook, OptimizerHook
from mtrain.runner.rank_state import own_rank_state
from mtrain.runner.workflow_position import normalize, resume_start


def _ckpt(world_size, ranks=None):
    ckpt = {'progress': {'world_size': world_size}, 'rng': {'torch': torch.tensor([0])},
            'data': {'epoch': 0}}
    if ranks is not None:
        ckpt['ranks'] = [{'rng': {'torch': torch.tensor([r])}, 'data': {'epoch': 0, 'rank': r}}
                         for r in range(ranks)]
    return ckpt


@pytest.mark.parametrize('rank', [0, 1])
def test_each_rank_restores_its_own_on_the_same_world_size(rank):
    own, note = own_rank_state(_ckpt(2, ranks=2), rank, 2)
    assert int(own['rng']['torch']) == rank and own['data']['rank'] == rank and note is None


def test_another_world_size_takes_rank_modulo_and_says_so():
    for rank, expected in ((0, 0), (1, 1), (2, 0), (3, 1)):
        own, note = own_rank_state(_ckpt(2, ranks=2), rank, 4)
        assert int(own['rng']['torch']) == expected
    assert 'rank r restores those of rank r mod 2' in note
    assert 'ranks 2 to 3 repeat the draws of ranks 0 to 1' in note
    own, note = own_rank_state(_ckpt(2, ranks=2), 0, 1)
    assert int(own['rng']['torch']) == 0 and 'this run has 1' in note and 'repeat' not in note


def test_one_process_checkpoint_on_two_says_the_ranks_share_its_state():
    own, note = own_rank_state(_ckpt(1), 1, 2)
    assert int(own['rng']['torch']) == 0
    assert 'ranks 1 to 1 repeat the draws of ranks 0 to 0' in note
    assert own_rank_state(_ckpt(1), 0, 1)[1] is None


def test_multi_process_checkpoint_without_every_rank_warns():
    # Written by rank 0 alone (a 1.x hook saving without gather_checkpoint_state, or an older
    # mtrain): every rank restores rank 0's state, said in one line.
    own, note = own_rank_state(_ckpt(2), 1, 2)
    assert int(own['rng']['torch']) == 0
    assert 'holds the random state of rank 0 only' in note and '\n' not in note


def test_mmcv_checkpoint_has_no_rng_and_no_note():
    assert own_rank_state({'meta': {'epoch': 1, 'iter': 8}}, 1, 2) == ({}, None)


@pytest.mark.parametrize('position,expected', [((0, 1), (1, 0)), ((1, 1), (0, 0)),
                                               ((0, 0), (0, 0)), ((1, 0), (1, 0))])
def test_a_finished_phase_is_stepped_over(position, expected):
    assert normalize(position, [('train', 1), ('val', 1)]) == expected


def test_resume_start_from_checkpoints_without_or_with_another_workflow():
    workflow = [('train', 1), ('val', 1)]
    assert resume_start(None, workflow) == ((0, 0), None)
    start, note = resume_start({'epoch': 1}, workflow)  # mmcv or an older mtrain
    assert start == (0, 0) and 'does not say where in the workflow' in note
    assert resume_start({'epoch': 1}, [('train', 1)]) == ((0, 0), None)
    saved = {'phase': [0, 1], 'workflow': [['train', 1], ['val', 1]]}
    assert resume_start(saved, workflow) == ((1, 0), None)
    start, note = resume_start(saved, [('train', 1)])
    assert start == (0, 0) and "this run has [('train', 1)]" in note


def test_a_resumed_run_logs_the_rank_note(make_runner, toy_loader, tmp_path, caplog):
    # A 1-process checkpoint made to look like one rank 0 wrote alone in a 2-process run.
    runner = make_runner(max_len=1)
    runner.register_hook(OptimizerHook())
    runner.register_hook(CheckpointHook(interval=1))
    runner.run([toy_loader], [('train', 1)])
    ckpt = torch.load(tmp_path / 'epoch_1.pth', weights_only=True)
    ckpt['progress']['world_size'] = 2
    torch.save(ckpt, tmp_path / 'two.pth')
    with caplog.at_level(logging.WARNING, 'mtrain.test'):
        make_runner(max_len=1).resume(str(tmp_path / 'two.pth'))
    assert sum('holds the random state of rank 0 only' in r.getMessage()
               for r in caplog.records) == 1
