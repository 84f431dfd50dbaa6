"""``tools/test.py`` scores a checkpoint as its training run's evaluation did (issue 33, item 6).

The ``evaluation`` keys the hook does not take (``topk`` here; ``iou_thr`` in
mmdet) are ``dataset.evaluate``'s arguments in training; ``tools/test.py``
passes them too, as mmdet 2.x's does.
"""

import json
import os

import pytest

USER_MODULE = '''
import torch
from mtrain.datasets import DigitsDataset
from mtrain.registry import DATASETS


@DATASETS.register_module(force=True)
class TopkDigits(DigitsDataset):
    """Accuracy of the k best classes (k=1 unless the config says otherwise)."""

    def evaluate(self, results, metric='accuracy', logger=None, topk=1):
        best = torch.as_tensor(results).topk(topk, dim=1).indices
        return {'accuracy': (best == self.labels[:, None]).any(1).float().mean().item()}
'''


@pytest.fixture
def topk_config(digits_config):
    """The digits demo, one short epoch, scored by top-3 accuracy in training and in test."""
    return digits_config(USER_MODULE, """
        data = dict(samples_per_gpu=256, val=dict(type='TopkDigits'),
                    test=dict(type='TopkDigits', split='val'))
        evaluation = dict(interval=1, metric='accuracy', topk=3, save_best='accuracy')
        runner = dict(max_epochs=1)
        """)


def test_test_py_reports_what_the_training_run_evaluated(train_tool, test_tool, tmp_path,
                                                         topk_config, capsys):
    work_dir = tmp_path / 'run'
    assert train_tool.main([topk_config, '--work-dir', str(work_dir)]) == 0
    [log] = [n for n in os.listdir(work_dir) if n.endswith('.log.json')]
    with open(work_dir / log) as f:
        [trained] = [r for r in map(json.loads, f) if r.get('mode') == 'val']
    capsys.readouterr()
    checkpoint = str(work_dir / 'epoch_1.pth')
    assert test_tool.main([topk_config, checkpoint]) == 0
    tested = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # The json log keeps 5 decimals.
    assert tested == {'accuracy': pytest.approx(trained['accuracy'], abs=5e-6)}
    # topk=3 was used: the top-1 accuracy of the same weights is lower after one epoch.
    assert test_tool.main([topk_config, checkpoint, '--eval-options', 'topk=1']) == 0
    top1 = json.loads(capsys.readouterr().out.strip().splitlines()[-1])['accuracy']
    assert top1 < tested['accuracy'] - 0.02
