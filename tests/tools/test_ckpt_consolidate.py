"""``tools/ckpt_consolidate.py``: a sharded checkpoint to one file and back (issue 34).

The digits demo on one process, writing sharded checkpoints; the folder, the file made
from it and the folder made from that file hold the same state, score the same in
``tools/test.py``, and resume to the same weights.
"""

import json

import pytest
import torch

from mtrain.runner import load_checkpoint_file
from mtrain.runner.sharded_checkpoint import is_sharded

SHORT = ["""
        data = dict(samples_per_gpu=256)
        runner = dict(max_epochs=1)
        checkpoint_config = dict(interval=1, sharded=True)
        evaluation = dict(interval=1, metric='accuracy')
        """]


@pytest.fixture
def short_config(digits_config):
    return digits_config('', SHORT[0])


def _leaves(obj, where='ckpt'):
    """``(path, value)`` of each leaf of a nested checkpoint; a tensor as its dtype and values."""
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, (list, tuple)):
        items = enumerate(obj)
    else:
        yield where, ((obj.dtype, obj.tolist()) if isinstance(obj, torch.Tensor) else obj)
        return
    for key, value in items:
        yield from _leaves(value, f'{where}.{key}')


def _equal(a, b):
    """Bitwise the same nested state (every leaf, at the same path)."""
    assert dict(_leaves(a)) == dict(_leaves(b))


def _score(test_tool, config, checkpoint, capsys):
    capsys.readouterr()
    assert test_tool.main([config, checkpoint]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_sharded_checkpoint_to_file_and_back_holds_scores_and_resumes_the_same(
        train_tool, test_tool, tool, short_config, tmp_path, capsys):
    consolidate = tool('ckpt_consolidate')
    assert train_tool.main([short_config, '--work-dir', str(tmp_path / 'run')]) == 0
    folder, whole, again = (str(tmp_path / 'run' / 'epoch_1.pth'), str(tmp_path / 'whole.pth'),
                            str(tmp_path / 'again.pth'))
    assert is_sharded(folder)
    assert consolidate.main([folder, whole]) == 0 and not is_sharded(whole)
    assert consolidate.main([whole, again]) == 0 and is_sharded(again)
    assert consolidate.main([whole, again]) == 1  # never over an existing one
    from_folder = load_checkpoint_file(folder)
    plain = torch.load(whole, weights_only=True)  # an ordinary file
    assert 'sharded' not in plain and set(plain) >= {'state_dict', 'optimizer', 'progress'}
    _equal({k: v for k, v in from_folder.items() if k != 'sharded'}, plain)
    _equal(load_checkpoint_file(again)['state_dict'], plain['state_dict'])
    _equal(load_checkpoint_file(again)['optimizer'], plain['optimizer'])
    scores = [_score(test_tool, short_config, path, capsys) for path in (folder, whole, again)]
    with open(next((tmp_path / 'run').glob('*.log.json'))) as f:  # what training scored
        [trained] = [r['accuracy'] for r in map(json.loads, f) if r.get('mode') == 'val']
    assert scores[0] == scores[1] == scores[2] == {'accuracy': pytest.approx(trained, abs=5e-6)}
    # One more epoch from the folder and from the file (its optimizer state keyed by name).
    ends = []
    for name, source in (('a', folder), ('b', whole)):
        work = tmp_path / name
        assert train_tool.main([short_config, '--work-dir', str(work), '--resume-from', source,
                                '--cfg-options', 'runner.max_epochs=2']) == 0
        ends.append(load_checkpoint_file(str(work / 'epoch_2.pth'))['state_dict'])
    _equal(ends[0], ends[1])


def test_a_file_with_an_optimizer_keyed_by_index_is_refused_with_the_way_out(
        tool, tmp_path, capsys):
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.ones(1, 2)).sum().backward()
    optimizer.step()
    torch.save({'state_dict': model.state_dict(), 'optimizer': optimizer.state_dict()},
               tmp_path / 'plain.pth')
    consolidate = tool('ckpt_consolidate')
    assert consolidate.main([str(tmp_path / 'plain.pth'), str(tmp_path / 'out.pth')]) == 1
    assert '--weights-only' in capsys.readouterr().err
    assert consolidate.main([str(tmp_path / 'plain.pth'), str(tmp_path / 'out.pth'),
                             '--weights-only']) == 0
    _equal(load_checkpoint_file(str(tmp_path / 'out.pth'))['state_dict'], model.state_dict())
