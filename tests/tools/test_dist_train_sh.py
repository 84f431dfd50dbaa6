"""``tools/dist_train.sh`` builds once per rank and still reports a mistake in one line.

Issue 33, item 13: the config is checked inside the run (every rank, before
its first iteration), not by a separate process that built the model and the
datasets once more and ran a batch nobody trained on. A user mistake is one
``error:`` line from one rank, the job's exit status 2, and no rank waits for
one that failed (each run has a deadline).
"""

import os
import subprocess
import sys

import pytest

from tool_loader import ROOT

DIST_TRAIN = os.path.join(ROOT, 'tools', 'dist_train.sh')

USER_MODULE = '''
import os
import time

from mtrain.datasets import DigitsDataset
from mtrain.registry import DATASETS
from mtrain.utils import ConfigError


@DATASETS.register_module(force=True)
class CountedDigits(DigitsDataset):
    """Appends "<split> <rank>" to $COUNT_FILE each time it is built."""

    def __init__(self, split='train', **kwargs):
        with open(os.environ['COUNT_FILE'], 'a') as f:
            f.write(f"{split} {os.environ.get('RANK', 'none')}\\n")
        super().__init__(split, **kwargs)


@DATASETS.register_module(force=True)
class SlowOnRank1Digits(DigitsDataset):
    """Rank 1 builds it 3 s later: rank 0 meets a mistake in the preflight first."""

    def __init__(self, split='train', **kwargs):
        if os.environ.get('RANK') == '1':
            time.sleep(3)
        super().__init__(split, **kwargs)


@DATASETS.register_module(force=True)
class MissingOnRank1Digits(DigitsDataset):
    """A data folder missing on one node: only rank 1 fails; rank 0 goes on to train."""

    def __init__(self, split='train', **kwargs):
        if os.environ.get('RANK') == '1':
            raise ConfigError('/data/digits is not a folder on this machine; copy the data '
                              'to every node', key='data.train')
        super().__init__(split, **kwargs)
'''

SHORT = 'data = dict(samples_per_gpu=128)\nrunner = dict(max_epochs=1)\n'


def _dist_train(config, tmp_path, *options, env=None):
    """``dist_train.sh CONFIG 2`` with a deadline: a rank left waiting fails the test."""
    env = dict(os.environ, PYTHON=sys.executable, PYTHONPATH=str(tmp_path), **(env or {}))
    argv = [DIST_TRAIN, config, '2', '--work-dir', str(tmp_path / 'work')]
    return subprocess.run(argv + (['--cfg-options', *options] if options else []), env=env,
                          capture_output=True, text=True, timeout=240)


@pytest.mark.slow
def test_each_rank_builds_each_dataset_once(digits_config, tmp_path):
    config = digits_config(USER_MODULE, SHORT + "data.update(train=dict(type='CountedDigits'), "
                           "val=dict(type='CountedDigits', split='val'))\n")
    count_file = tmp_path / 'built.txt'
    proc = _dist_train(config, tmp_path, env={'COUNT_FILE': str(count_file)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    built = sorted(count_file.read_text().splitlines())
    assert built == ['train 0', 'train 1', 'val 0', 'val 1']


@pytest.mark.slow
@pytest.mark.parametrize('dataset, options, expected', [
    # Every rank meets it (the model scores 5 classes, the data has 10); rank 1 three
    # seconds later, so rank 0's report reaches it while it is still building.
    ('SlowOnRank1Digits', ['model.num_classes=5'], 'the model scores 5 classes but data.train'),
    # Only rank 1 meets it; rank 0 would wait for it in its first backward.
    ('MissingOnRank1Digits', [], '/data/digits is not a folder on this machine'),
])
def test_a_mistake_is_one_line_and_no_rank_waits(digits_config, tmp_path, dataset, options,
                                                  expected):
    config = digits_config(USER_MODULE, SHORT + f"data.update(train=dict(type='{dataset}'))\n")
    proc = _dist_train(config, tmp_path, *options)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.count(expected) == 1, proc.stderr
    [line] = [text for text in proc.stderr.splitlines() if expected in text]
    assert line.startswith('error: ')
    assert 'Traceback' not in proc.stderr and 'ChildFailedError' not in proc.stderr
