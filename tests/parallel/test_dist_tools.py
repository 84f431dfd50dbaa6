"""tools/dist_train.sh (torchrun) and tools/test.py --launcher pytorch, end to end."""

import json
import os
import subprocess
import sys

import pytest
import torch

from dist_launch import ROOT, launch
from tool_loader import load_tool
from mtrain.datasets import DigitsDataset
from mtrain.registry import MODELS, build

pytestmark = pytest.mark.slow

DIGITS = os.path.join(ROOT, 'configs', 'digits', 'lenet_digits.py')


def test_dist_train_sh_on_two_processes_reaches_the_demo_accuracy(tmp_path):
    env = dict(os.environ, PYTHON=sys.executable)
    env.pop('PORT', None)  # one node without PORT: torchrun picks a free port
    proc = subprocess.run([os.path.join(ROOT, 'tools', 'dist_train.sh'), DIGITS, '2',
                           '--work-dir', str(tmp_path)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [log] = [n for n in os.listdir(tmp_path) if n.endswith('.log.json')]  # rank 0 only
    with open(tmp_path / log) as f:
        records = [json.loads(line) for line in f]
    assert 'world size 2' in records[0]['env_info']
    train = [r for r in records if r.get('mode') == 'train']
    val = [r for r in records if r.get('mode') == 'val']
    assert [r['iter'] for r in train[:2]] == [10, 20]  # 1,433 images / (2 x 32) = 23 per epoch
    assert len(val) == 10 and val[-1]['accuracy'] >= 0.97
    assert os.readlink(tmp_path / 'latest.pth') == 'epoch_10.pth'


def _test_tool_job(rank, argv):
    os._exit(load_tool('test').main(argv))


def test_test_tool_on_two_ranks_scores_like_one_process(tmp_path, capfd):
    model = build(dict(type='LeNet', num_classes=10, in_channels=1, width=32), MODELS, 'model')
    torch.save({'state_dict': model.state_dict()}, tmp_path / 'random.pth')
    DigitsDataset('val')  # scikit-learn's import, here once rather than in each forked rank
    # 364 val images in batches of 25: rank shares of 182 end in a partial batch.
    argv = [DIGITS, str(tmp_path / 'random.pth'), '--metrics', 'accuracy',
            '--cfg-options', 'data.samples_per_gpu=25']
    assert load_tool('test').main(argv) == 0
    single = json.loads(capfd.readouterr().out.strip().splitlines()[-1])
    codes, _ = launch(_test_tool_job, argv + ['--launcher', 'pytorch'], init=False)
    out = capfd.readouterr().out.strip().splitlines()
    assert codes == [0, 0]
    assert [json.loads(line) for line in out if line.startswith('{')] == [single]  # rank 0 only


def test_test_tool_on_two_ranks_says_a_mistake_once(tmp_path, capfd):
    """Every rank meets the missing checkpoint; the job prints it in one line, not one per rank."""
    missing = str(tmp_path / 'no_such.pth')
    codes, _ = launch(_test_tool_job, [DIGITS, missing, '--launcher', 'pytorch'], init=False)
    errors = [line for line in capfd.readouterr().err.splitlines() if line.startswith('error:')]
    assert codes == [2, 2]
    assert len(errors) == 1 and missing in errors[0], errors
