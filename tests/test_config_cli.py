"""The config traps of a newcomer's first hour (issue 17 traps 1, 3, 4, 6; issue 12 item 8)."""

import os
import re
import shlex
import subprocess
import sys
import textwrap

import pytest

from mtrain.config import load_config, parse_cfg_options
from mtrain.runner import build_runner
from mtrain.utils import ConfigError, get_logger

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIGITS = os.path.join(ROOT, 'configs', 'digits', 'lenet_digits.py')
IMAGEFOLDER = os.path.join(ROOT, 'configs', 'imagefolder', 'resnet18_imagefolder.py')


def write(path, text):
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_a_list_of_dicts_in_cfg_options_is_a_list_of_dicts():
    cfg = load_config(DIGITS, parse_cfg_options([
        "log_config.hooks=[dict(type='TextLoggerHook'), dict(type='TensorboardLoggerHook')]"]))
    assert [h['type'] for h in cfg.log_config.hooks] == ['TextLoggerHook',
                                                          'TensorboardLoggerHook']


def test_positional_dict_arguments_in_a_list_are_an_error_not_a_recursion():
    with pytest.raises(ConfigError, match=r'key `x`.*dict\(key=value'):
        parse_cfg_options(['x=[dict(a, b)]'])


def test_the_first_example_of_docs_config_md_works(tmp_path):
    with open(os.path.join(ROOT, 'docs', 'config.md')) as f:
        block = re.search(r'```bash\n(.*?)```', f.read(), re.S).group(1)
    args = block.replace('\\\n', ' ').split('--cfg-options', 1)[1]
    cfg = load_config(DIGITS, parse_cfg_options(shlex.split(args)))
    assert cfg.runner.max_epochs == 5 and cfg.log_config.interval == 5
    runner, _, _ = build_runner(cfg, str(tmp_path), get_logger(), seed=0)
    assert 'EMAHook' in [type(h).__name__ for h in runner.hooks]


def test_a_missing_list_index_blames_that_key_alone_and_says_how_long_the_list_is():
    # the demo's custom_hooks holds one hook (ThroughputMonitorHook): index 1 is missing
    with pytest.raises(ConfigError) as err:
        load_config(DIGITS, parse_cfg_options(['optimizer.lr=0.1', 'custom_hooks.1.priority=30',
                                               'runner.max_epochs=3']))
    message = str(err.value)
    assert 'key `custom_hooks.1.priority`' in message and 'has 1 entries' in message
    assert 'runner.max_epochs' not in message and 'lenet_digits.py' not in message


def test_a_cfg_options_typo_is_blamed_on_the_flag_not_the_file():
    with pytest.raises(ConfigError) as err:
        load_config(DIGITS, parse_cfg_options(['lr_confg.policy=step']))
    assert str(err.value).startswith('--cfg-options, key `lr_confg`')
    assert "Did you mean 'lr_config'" in str(err.value)


def test_a_top_level_delete_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match='_delete_ at the top level.*inside'):
        load_config(write(tmp_path / 'c.py', """
            _base_ = ['%s']
            _delete_ = True
            optimizer = dict(type='Adam', lr=1e-3)
        """ % DIGITS))


def test_custom_imports_given_on_the_command_line_are_imported(tmp_path, monkeypatch):
    (tmp_path / 'my_cli_mod.py').write_text('LOADED = True\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    load_config(DIGITS, parse_cfg_options(["custom_imports=dict(imports=['my_cli_mod'])"]))
    assert sys.modules['my_cli_mod'].LOADED
    with pytest.raises(ConfigError, match='--cfg-options, key `custom_imports`.*no_such_cli'):
        load_config(DIGITS, parse_cfg_options(["custom_imports.imports=['no_such_cli']"]))


def test_data_root_set_in_a_child_config_moves_the_base_paths(tmp_path):
    cfg = load_config(write(tmp_path / 'mine.py', f"""
        _base_ = ['{IMAGEFOLDER}']
        data_root = '/my/images'
    """))
    assert cfg.data.train.root == '/my/images/train'
    assert cfg.data.val.root == '/my/images/val' and cfg.data.test.root == '/my/images/val'
    nested = load_config(write(tmp_path / 'deeper.py', """
        _base_ = ['./mine.py']
        data_root = 'elsewhere'
    """), parse_cfg_options(['data_root=/final']))
    assert nested.data.train.root == '/final/train'


def test_a_data_root_below_the_base_root_is_not_applied_twice(tmp_path):
    write(tmp_path / 'base.py', """
        data_root = 'data'
        data = dict(train=dict(type='ImageFolder', root=data_root + '/train'))
    """)
    cfg = load_config(write(tmp_path / 'child.py', """
        _base_ = ['./base.py']
        data_root = 'data/sub'
        data = dict(val=dict(type='ImageFolder', root=data_root + '/val'))
    """))
    assert cfg.data.train.root == 'data/sub/train' and cfg.data.val.root == 'data/sub/val'


@pytest.mark.parametrize('tool', ['print_config', 'train'])
def test_custom_imports_of_a_project_module_work_from_the_project_directory(tmp_path, tool):
    """``python tools/<tool>.py`` run from the directory holding ``my_project/`` (no PYTHONPATH=.)."""
    (tmp_path / 'my_project').mkdir()
    (tmp_path / 'my_project' / '__init__.py').write_text('')
    (tmp_path / 'my_project' / 'optim.py').write_text(textwrap.dedent("""
        import torch
        from mtrain.registry import OPTIMIZERS

        @OPTIMIZERS.register_module()
        class ProjectSGD(torch.optim.SGD):
            pass
    """))
    config = write(tmp_path / 'cfg.py', f"""
        _base_ = ['{DIGITS}']
        custom_imports = dict(imports=['my_project.optim'], allow_failed_imports=False)
        optimizer = dict(type='ProjectSGD')
        runner = dict(max_epochs=1)
        evaluation = None
    """)
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(p for p in env.get('PYTHONPATH', '').split(os.pathsep)
                                        if p and os.path.abspath(p) != str(tmp_path))
    extra = ['--check-config'] if tool == 'train' else []  # reads the config as training does
    proc = subprocess.run([sys.executable, os.path.join(ROOT, 'tools', f'{tool}.py'), 'cfg.py',
                           *extra], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
