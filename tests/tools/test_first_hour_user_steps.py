"""First hour, user code (issue 33, item 11): one line naming the class and the fix.

A metric ``save_best`` follows that ``evaluate`` returns as an array, a
1.x-style model without ``val_step`` under a ``('val', 1)`` workflow phase,
and a model that returns losses in eval mode (which ``tools/dist_train.sh``'s
separate ``--check-config`` run used to catch) each end ``tools/train.py``
with one ``error:`` line and no traceback.
"""

import os

import pytest

USER_MODULE = '''
import numpy as np
from torch import nn
from mtrain.datasets import DigitsDataset
from mtrain.registry import DATASETS, MODELS


@MODELS.register_module(force=True)
class TrainStepOnlyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 10)

    def train_step(self, data, optimizer):
        loss = nn.functional.cross_entropy(self.fc(data['img'].flatten(1)), data['gt_label'])
        return dict(loss=loss, log_vars=dict(loss=loss.item()), num_samples=len(data['img']))


@MODELS.register_module(force=True)
class BothStepsNet(TrainStepOnlyNet):
    def val_step(self, data, optimizer=None):
        return self.train_step(data, optimizer)


@MODELS.register_module(force=True)
class AlwaysLossesNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 10)

    def forward(self, img, gt_label):  # the losses in eval mode too: no predictions
        return {'loss_ce': nn.functional.cross_entropy(self.fc(img.flatten(1)), gt_label)}


@DATASETS.register_module(force=True)
class PerClassDigits(DigitsDataset):
    METRICS = ('accuracy', 'mAcc')

    def evaluate(self, results, metric='accuracy', logger=None):
        right = (results.argmax(1) == self.labels).numpy()
        per_class = [right[self.labels.numpy() == c].mean() for c in range(10)]
        return {'accuracy': np.array(per_class), 'mAcc': float(np.mean(per_class))}
'''


@pytest.fixture
def user_config(digits_config):
    """``user_config(body)``: the digits demo (one 6-iteration epoch) importing the module above."""
    return lambda body: digits_config(USER_MODULE, 'data = dict(samples_per_gpu=256)\n'
                                      'runner = dict(max_epochs=1)\n' + body)


def _error_line(train_tool, config, work_dir, capsys):
    """The run's exit status and its one ``error:`` line (asserting there is no traceback)."""
    status = train_tool.main([config, '--work-dir', str(work_dir)])
    err = capsys.readouterr().err
    assert 'Traceback' not in err, err
    errors = [line for line in err.splitlines() if line.startswith('error:')]
    return status, errors


def test_an_array_metric_followed_by_save_best_names_the_dataset(train_tool, tmp_path,
                                                                  user_config, capsys):
    config = user_config("data = dict(val=dict(type='PerClassDigits'))\n"
                         "evaluation = dict(metric='accuracy', save_best='accuracy')\n")
    status, [line] = _error_line(train_tool, config, tmp_path / 'array', capsys)
    assert status == 2
    assert line.startswith("error: key `evaluation.save_best`: PerClassDigits.evaluate "
                           "returned 'accuracy' as a list of 10 values"), line
    assert 'set save_best to a metric that is a number' in line
    # The mean (mAcc) is a number: save_best follows it.
    config = user_config("data = dict(val=dict(type='PerClassDigits'))\n"
                         "evaluation = dict(metric='accuracy', save_best='mAcc')\n")
    assert train_tool.main([config, '--work-dir', str(tmp_path / 'mAcc')]) == 0
    assert any(n.startswith('best_mAcc_epoch_1') for n in os.listdir(tmp_path / 'mAcc'))


def test_a_val_phase_without_val_step_names_the_model_before_training(train_tool, tmp_path,
                                                                      user_config, capsys):
    body = ("model = dict(_delete_=True, type='{}')\nworkflow = [('train', 1), ('val', 1)]\n"
            'evaluation = None\n')  # the val phase alone
    work_dir = tmp_path / 'no_val_step'
    status, [line] = _error_line(train_tool, user_config(body.format('TrainStepOnlyNet')),
                                 work_dir, capsys)
    assert status == 2
    assert "key `workflow`: the workflow's ('val', 1) phase calls TrainStepOnlyNet.val_step, " \
           'but TrainStepOnlyNet defines train_step and no val_step; add val_step' in line, line
    assert not [n for n in os.listdir(work_dir) if n.endswith('.pth')]  # before training
    assert train_tool.main([user_config(body.format('BothStepsNet')), '--work-dir',
                            str(tmp_path / 'both')]) == 0


def test_a_model_returning_losses_in_eval_mode_is_named_at_the_first_evaluation(
        train_tool, tmp_path, user_config, capsys):
    config = user_config("model = dict(_delete_=True, type='AlwaysLossesNet')\n")
    status, [line] = _error_line(train_tool, config, tmp_path / 'losses', capsys)
    assert status == 2
    assert line.startswith("error: key `model`: in eval mode AlwaysLossesNet returned losses "
                           "(['loss', 'loss_ce']); evaluation needs the predictions"), line
