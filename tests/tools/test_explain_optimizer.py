"""tools/explain_optimizer.py: one row per parameter, matching the optimizer training builds."""

import json
import os

import pytest

from mtrain.config import load_config
from mtrain.optim import build_optimizer
from mtrain.registry import MODELS, build

PARAMWISE = """
optimizer = dict(paramwise_cfg=dict(
    norm_decay_mult=0., bias_lr_mult=2., dwconv_decay_mult=0.5,
    custom_keys={{'head.3': dict(lr_mult=0.1), 'head': dict(decay_mult=0.5){extra}}}))
"""


@pytest.fixture(scope='module')
def explainer(tool):
    return tool('explain_optimizer')


def _config(tmp_path, repo_root, extra=''):
    path = tmp_path / 'paramwise.py'
    path.write_text(f"_base_ = ['{repo_root}/configs/digits/lenet_digits.py']\n"
                    + PARAMWISE.format(extra=extra))
    return str(path)


def test_rows_match_the_optimizers_param_groups(explainer, tmp_path, repo_root, capsys):
    config = _config(tmp_path, repo_root)
    assert explainer.main([config, '--json']) == 0
    report = json.loads(capsys.readouterr().out)
    assert report['warnings'] == []
    rows = {r['name']: r for r in report['rows']}

    cfg = load_config(config)
    model = build(cfg.model, MODELS, 'model')
    optimizer = build_optimizer(model, cfg.optimizer)
    names = dict(model.named_parameters())
    assert set(rows) == set(names)
    for name, param in names.items():
        [(index, group)] = [(i, g) for i, g in enumerate(optimizer.param_groups)
                            if any(p is param for p in g['params'])]
        row = rows[name]
        assert (row['group'], row['lr'], row['weight_decay'], row['momentum']) == \
            (index, group['lr'], group['weight_decay'], group['momentum'])
        assert row['shape'] == list(param.shape)
    # Each rule of paramwise_cfg, as mmcv 1.x decides it (LeNet's first conv has one
    # input channel, so mmcv counts it as depthwise).
    assert {n: r['rule'] for n, r in rows.items()} == {
        'features.0.weight': 'dwconv', 'features.1.weight': 'norm', 'features.1.bias': 'norm',
        'features.3.weight': 'default', 'features.4.weight': 'norm', 'features.4.bias': 'norm',
        'features.7.weight': 'default', 'features.7.bias': 'bias',
        'head.0.weight': 'custom_keys:head', 'head.0.bias': 'custom_keys:head',
        'head.3.weight': 'custom_keys:head.3', 'head.3.bias': 'custom_keys:head.3'}
    assert rows['features.7.bias']['lr'] == pytest.approx(0.2)  # bias_lr_mult=2
    assert rows['head.3.weight']['lr'] == pytest.approx(0.01)  # the longer key wins
    assert rows['features.1.weight']['weight_decay'] == 0


def test_table_and_the_warning_for_a_custom_key_that_matches_nothing(explainer, tmp_path,
                                                                      repo_root, capsys):
    config = _config(tmp_path, repo_root, extra=", 'haed': dict(lr_mult=3.)")
    assert explainer.main([config]) == 1  # training only warns; the tool flags the typo
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ['group', 'name', 'shape', 'lr', 'weight_decay', 'momentum',
                                'rule']
    assert lines[1].split() == ['0', 'features.0.weight', '32x1x3x3', '0.1', '0.00025', '0.9',
                                'dwconv']
    assert '12 parameters in 5 param group(s), 5 distinct' in out  # one group per setting
    assert ("warning: optimizer.paramwise_cfg.custom_keys['haed'] decided no parameter: no "
            "parameter name contains it. Did you mean 'head'") in out


def test_no_paramwise_cfg_is_one_group(explainer, repo_root, capsys):
    config = os.path.join(repo_root, 'configs', 'digits', 'lenet_digits.py')
    assert explainer.main([config, '--json']) == 0
    rows = json.loads(capsys.readouterr().out)['rows']
    assert {(r['group'], r['lr'], r['weight_decay'], r['rule']) for r in rows} == \
        {(0, 0.1, 0.0005, 'default')}


CONSTRUCTOR_MODULE = '''
from mtrain.optim import DefaultOptimizerConstructor
from mtrain.registry import OPTIMIZER_CONSTRUCTORS


@OPTIMIZER_CONSTRUCTORS.register_module(force=True)
class DepthDecay(DefaultOptimizerConstructor):
    def add_params(self, params, module, prefix='', is_dcn_module=None):
        for name, param in module.named_parameters():
            depth = name.count('.')
            params.append({'params': [param],
                           'lr': self.base_lr * self.paramwise_cfg['decay_rate'] ** depth})
'''


def test_explain_optimizer_explains_a_custom_constructor(tool, tmp_path, repo_root, capsys,
                                                         monkeypatch):
    """Issue 24: 'decay_rate' is the custom constructor's key; explain what it built."""
    (tmp_path / 'depth_decay.py').write_text(CONSTRUCTOR_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    config = tmp_path / 'cfg.py'
    config.write_text(f"_base_ = ['{repo_root}/configs/digits/lenet_digits.py']\n"
                      "custom_imports = dict(imports=['depth_decay'])\n"
                      "optimizer = dict(constructor='DepthDecay', paramwise_cfg=dict("
                      "decay_rate=0.5))\n")
    assert tool('explain_optimizer').main([str(config), '--json']) == 0
    rows = json.loads(capsys.readouterr().out)['rows']
    lr = {r['name']: r['lr'] for r in rows}
    base = lr['features.0.weight'] / 0.5 ** 2  # two dots in 'features.0.weight'
    for row in rows:
        assert row['lr'] == pytest.approx(base * 0.5 ** row['name'].count('.'))
        assert row['rule'] == 'DepthDecay.add_params'
