"""tools/print_config.py: the merged config, as a Python config that loads again, or JSON."""

import json
import os

from mmengine.config import Config

from mtrain.config import load_config


def test_printed_config_is_the_merged_config_and_loads_again(tool, repo_root, tmp_path, capsys):
    print_config = tool('print_config')
    config = os.path.join(repo_root, 'configs', 'digits', 'lenet_digits.py')
    options = ['optimizer.lr=0.05', 'runner.max_epochs=3']
    assert print_config.main([config, '--cfg-options'] + options) == 0
    printed = tmp_path / 'printed.py'
    printed.write_text(capsys.readouterr().out)
    again = Config.fromfile(str(printed)).to_dict()
    expected = load_config(config, {'optimizer.lr': 0.05, 'runner.max_epochs': 3}).to_dict()
    assert again == expected
    assert again['optimizer']['lr'] == 0.05 and again['lr_config']['policy'] == 'CosineAnnealing'
    assert '_base_' not in again  # inheritance resolved

    assert print_config.main([config, '--format', 'json']) == 0
    assert json.loads(capsys.readouterr().out)['runner'] == {'type': 'EpochBasedRunner',
                                                             'max_epochs': 10}


def test_a_typo_fails_with_the_training_message(tool, tmp_path, repo_root, capsys):
    config = tmp_path / 'typo.py'
    config.write_text(f"_base_ = ['{repo_root}/configs/digits/lenet_digits.py']\n"
                      "lr_confg = dict(policy='step')\n")
    assert tool('print_config').main([str(config)]) == 2
    err = capsys.readouterr().err
    assert 'lr_confg' in err and "Did you mean 'lr_config'?" in err



def test_explain_names_the_file_or_flag_behind_each_key(tool, repo_root, capsys):
    config = os.path.join(repo_root, 'configs', 'digits', 'lenet_digits.py')
    assert tool('print_config').main([config, '--explain', '--cfg-options',
                                      'optimizer.lr=0.05']) == 0
    rows = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert rows['optimizer.lr'] == '--cfg-options optimizer.lr'
    assert rows['optimizer.momentum'].endswith('configs/_base_/schedules/sgd_cosine_10e.py')
    assert rows['seed'].endswith('configs/digits/lenet_digits.py')
    assert rows['model.type'].endswith('configs/_base_/models/lenet.py')


def test_explain_reads_configs_that_reference_base_values(tool, tmp_path, capsys):
    (tmp_path / 'base.py').write_text("lr = 0.1\noptimizer = dict(type='SGD', lr=lr)\n")
    (tmp_path / 'child.py').write_text(
        "_base_ = ['./base.py']\n"
        "runner = dict(type='EpochBasedRunner', max_epochs={{ _base_.lr }})\n"
        "optimizer = dict(lr={{_base_.optimizer.lr}}, momentum=0.9)\n")
    assert tool('print_config').main([str(tmp_path / 'child.py'), '--explain']) == 0
    rows = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert rows['optimizer.lr'].endswith('child.py') and rows['lr'].endswith('base.py')
    assert rows['optimizer.type'].endswith('base.py')
    assert rows['runner.max_epochs'].endswith('child.py')


def test_an_mmengine_config_with_custom_hooks_keeps_its_schedule(tool, repo_root, capsys):
    """Issue 33, the worst one, as print_config showed it: any custom_hooks (even [])
    dropped the ParamSchedulerHook from the translated config."""
    config = os.path.join(repo_root, 'configs', 'digits', 'lenet_digits_mmengine.py')
    for hooks in ('[]', "[dict(type='EMAHook', momentum=0.001)]"):
        assert tool('print_config').main([config, '--format', 'json', '--cfg-options',
                                          f'custom_hooks={hooks}']) == 0
        printed = json.loads(capsys.readouterr().out)['custom_hooks']
        assert [h['type'] for h in printed][0] == 'ParamSchedulerHook', printed
