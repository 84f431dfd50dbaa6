"""Which way a sweep optimizes: the rule that picks the config's best checkpoint.

Issue 33 item 4: ``evaluation.rule='less'`` was never read, so a sweep maximized
``mae``. The direction comes from :func:`mtrain.defaults.metric_rule`, the rule
``EvalHook`` applies to ``save_best``; the last test pins the two together.
"""

import pytest
from sweep_helpers import CONFIG
from torch.utils.data import DataLoader

from mtrain.defaults import metric_rule
from mtrain.hooks import EvalHook
from mtrain.sweep import default_metric
from mtrain.utils import ConfigError


def _config(tmp_path, evaluation):
    path = tmp_path / 'cfg.py'
    path.write_text(f'_base_ = [{CONFIG!r}]\nevaluation = {evaluation}\n')
    return str(path)


@pytest.mark.parametrize('evaluation,metric,direction', [
    ("dict(metric='mae', save_best='mae', rule='less')", None, 'minimize'),
    ("dict(metric='EPE', save_best='EPE', rule='less')", 'EPE', 'minimize'),
    ("dict(metric='rmse', greater_keys=[], less_keys=['rmse'])", None, 'minimize'),
    ("dict(metric='accuracy')", None, 'maximize'),
    ("dict(metric='accuracy', save_best='val_loss')", None, 'minimize'),
    ("dict(metric=['mIoU', 'loss'], save_best='mIoU', rule='greater')", 'loss', 'minimize'),
])
def test_the_direction_is_the_best_checkpoints_rule(tmp_path, evaluation, metric, direction):
    found = default_metric(_config(tmp_path, evaluation), metric, None)
    assert found[1] == direction, found


@pytest.mark.parametrize('evaluation,message', [
    ("dict(metric='wer', save_best='wer')", "a greater or a smaller 'wer'"),
    ("dict(metric='mae', save_best='mae', rule='lower')", "evaluation.rule='lower' is neither"),
])
def test_a_metric_without_a_direction_is_one_config_error(tmp_path, evaluation, message):
    with pytest.raises(ConfigError, match=message):
        default_metric(_config(tmp_path, evaluation), None, None)
    assert default_metric(_config(tmp_path, evaluation), None, 'min')[1] == 'minimize'


class _Scored(list):
    def evaluate(self, results, logger=None, **kwargs):
        return {}


@pytest.mark.parametrize('key,rule,greater,less', [
    ('accuracy', None, None, None), ('top1_err', None, None, None), ('mAP', None, None, None),
    ('val_loss', None, None, None), ('bbox_mAP_50', None, None, None), ('mae', 'less', None, None),
    ('rmse', None, [], ['rmse']), ('AR@100', None, None, None), ('Loss', None, None, None),
])
def test_the_sweep_and_the_eval_hook_ask_one_rule(key, rule, greater, less):
    hook = EvalHook(DataLoader(_Scored([0])), save_best=key, rule=rule, greater_keys=greater,
                    less_keys=less)
    assert hook.rule == metric_rule(key, rule, greater, less)
