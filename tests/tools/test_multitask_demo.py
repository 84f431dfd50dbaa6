"""The multitask demo end to end: tools/train.py, per-task losses in the log, per-task accuracy."""

import json
import os

import pytest

CONFIG = ('configs', 'digits_multitask', 'multitask_digits.py')


def test_multitask_demo_trains_each_task_to_97_percent(train_tool, test_tool, repo_root,
                                                       tmp_path, capsys):
    config = os.path.join(repo_root, *CONFIG)
    assert train_tool.main([config, '--work-dir', str(tmp_path), '--cfg-options',
                            'checkpoint_config.interval=-1']) == 0
    [log] = [n for n in os.listdir(tmp_path) if n.endswith('.log.json')]
    with open(tmp_path / log) as f:
        records = [json.loads(line) for line in f][1:]
    train = [r for r in records if r['mode'] == 'train']
    val = [r for r in records if r['mode'] == 'val']
    # Each task's losses are logged under its name; 'loss' is their sum (loss_reduction='sum').
    for r in train:
        assert abs(r['loss'] - r['low.loss'] - r['high.loss']) < 2e-5  # logs keep 5 decimals
    assert train[-1]['low.loss'] < train[0]['low.loss'] / 5
    assert train[-1]['high.loss'] < train[0]['high.loss'] / 5
    assert len(val) == 4
    assert val[-1]['low.accuracy'] >= 0.97 and val[-1]['high.accuracy'] >= 0.97
    # 23 steps per epoch (718 'low' training images / 32), one update per step, 4 epochs:
    # OneCycleLR over '{num_updates}' = 92 updates has annealed to ~0 by the last log line.
    assert train[-1]['lr'] < 1e-3

    capsys.readouterr()
    assert test_tool.main([config, str(tmp_path / 'latest.pth')]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result['low.accuracy'] == pytest.approx(val[-1]['low.accuracy'], abs=1e-5)
    assert result['high.accuracy'] == pytest.approx(val[-1]['high.accuracy'], abs=1e-5)
