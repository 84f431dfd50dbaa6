"""Config loading: inheritance, _delete_, custom_imports, --cfg-options, typo detection."""

import sys
import textwrap

import pytest

from mtrain.config import load_config, parse_cfg_options
from mtrain.utils import ConfigError


def write(path, text):
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_base_inheritance_and_delete(tmp_path):
    write(tmp_path / 'base.py', """
        optimizer = dict(type='SGD', lr=0.1, momentum=0.9)
        lr_config = dict(policy='step', step=[3], warmup='linear', warmup_iters=5)
    """)
    cfg = load_config(write(tmp_path / 'child.py', """
        _base_ = './base.py'
        optimizer = dict(lr=0.05)
        lr_config = dict(_delete_=True, policy='fixed')
    """))
    assert cfg.optimizer == dict(type='SGD', lr=0.05, momentum=0.9)
    assert cfg.lr_config == dict(policy='fixed')


def test_cfg_options_with_list_indices(tmp_path):
    cfg = load_config(write(tmp_path / 'c.py', """
        custom_hooks = [dict(type='A', priority=50), dict(type='B')]
        optimizer = dict(type='SGD', lr=0.1)
    """), parse_cfg_options(['custom_hooks.0.priority=30', 'optimizer.lr=0.01',
                             'workflow=[("train",1)]']))
    assert cfg.custom_hooks[0].priority == 30 and cfg.optimizer.lr == 0.01
    assert list(cfg.workflow[0]) == ['train', 1]


def test_cfg_options_take_literal_dicts(tmp_path):
    cfg = load_config(write(tmp_path / 'c.py', """
        optimizer = dict(type='SGD', lr=0.1, momentum=0.9)
        lr_config = dict(policy='step', step=[3])
    """), parse_cfg_options([
        "optimizer=dict(lr=0.01, paramwise_cfg=dict(custom_keys={'head': dict(lr_mult=10.)}))",
        "lr_config={'_delete_': True, 'policy': 'fixed', 'steps': [dict(a=1), (2, 3)]}"]))
    assert cfg.optimizer.to_dict() == dict(type='SGD', lr=0.01, momentum=0.9, paramwise_cfg=dict(
        custom_keys={'head': dict(lr_mult=10.)}))  # merged, as a _base_ override is
    assert cfg.lr_config.to_dict() == dict(policy='fixed', steps=[dict(a=1), (2, 3)])


@pytest.mark.parametrize('value', ["dict(type=SGD)", "dict(**x)", "{'a': 1"])
def test_a_dict_option_that_is_not_a_literal_says_how_to_write_it(value):
    with pytest.raises(ConfigError, match=r"not a literal dict.*optimizer\.type=SGD"):
        parse_cfg_options([f'optimizer={value}'])


def test_malformed_cfg_option_is_a_clear_error():
    with pytest.raises(ConfigError, match="is not key=value"):
        parse_cfg_options(['optimizer.lr'])


def test_custom_imports_loads_a_users_module(tmp_path, monkeypatch):
    pkg = tmp_path / 'my_ext_mod.py'
    pkg.write_text('LOADED = True\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    load_config(write(tmp_path / 'c.py', "custom_imports = dict(imports=['my_ext_mod'])\n"))
    assert sys.modules['my_ext_mod'].LOADED


def test_failing_custom_import_names_the_key(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path / 'c.py', "custom_imports = dict(imports=['no_such_mod_x'])\n"))
    assert 'custom_imports' in str(err.value) and 'c.py' in str(err.value)


def test_missing_base_names_the_file(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path / 'c.py', "_base_ = './missing_base.py'\n"))
    assert 'c.py' in str(err.value) and '_base_' in str(err.value)


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match='does not exist'):
        load_config(str(tmp_path / 'nope.py'))


@pytest.mark.parametrize('typo,fix', [('lr_confg', 'lr_config'), ('optimizer_confg', 'optimizer_config'),
                                      ('checkpoint_cfg', 'checkpoint_config'), ('evalution', 'evaluation')])
def test_top_level_typos_are_reported_with_the_known_key(tmp_path, typo, fix):
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path / 'c.py', f"{typo} = dict()\n"))
    assert typo in str(err.value) and f"'{fix}'" in str(err.value)


def test_helper_variables_and_openmmlab_runtime_keys_are_accepted(tmp_path):
    cfg = load_config(write(tmp_path / 'c.py', """
        data_root = '/data/'
        img_norm_cfg = dict(mean=[0], std=[1])
        dist_params = dict(backend='nccl'); log_level = 'INFO'; opencv_num_threads = 0
        mp_start_method = 'fork'; auto_scale_lr = dict(base_batch_size=16); gpu_ids = [0]
        find_unused_parameters = False; fp16 = None; load_from = None; resume_from = None
        workflow = [('train', 1)]
    """))
    assert cfg.data_root == '/data/'


def test_unknown_data_key_suggests_the_closest(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path / 'c.py', "data = dict(samples_per_gpus=2)\n"))
    assert 'data.samples_per_gpus' in str(err.value) and "'samples_per_gpu'" in str(err.value)


def test_syntax_error_names_file_and_line(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path / 'c.py', "model = dict(\n"))
    assert 'c.py' in str(err.value)


def test_cyclic_bases_are_reported_not_a_recursion_error(tmp_path):
    write(tmp_path / 'a.py', "_base_ = './b.py'\n")
    write(tmp_path / 'b.py', "_base_ = './a.py'\n")
    with pytest.raises(ConfigError, match='cycle: a.py -> b.py -> a.py'):
        load_config(str(tmp_path / 'a.py'))


def test_config_sources_name_the_file_or_flag_that_set_each_key(tmp_path):
    from mtrain.config_sources import config_sources
    base = write(tmp_path / 'base.py', """
        optimizer = dict(type='SGD', lr=0.1, momentum=0.9)
        lr_config = dict(policy='step', step=[3])
    """)
    child = write(tmp_path / 'child.py', """
        _base_ = './base.py'
        optimizer = dict(lr=0.05)
        lr_config = dict(_delete_=True, policy='fixed')
    """)
    sources = config_sources(child, {'optimizer.momentum': 0.8})
    assert sources == {'optimizer.type': base, 'optimizer.lr': child,
                       'optimizer.momentum': '--cfg-options optimizer.momentum',
                       'lr_config.policy': child}
