"""A corpus of broken configs: each fails before training with the file, key path and a fix."""

import os
import textwrap

import pytest

BASE = "_base_ = ['{root}/configs/digits/lenet_digits.py']\n"

# (name, config body, the key path the message must name, a suggestion it must contain)
CASES = [
    ('unknown_model_type', "model = dict(type='LeNett')", 'model.type', "'LeNet'"),
    ('unknown_optimizer', "optimizer = dict(type='SGDD')", 'optimizer.type', "'SGD'"),
    ('unknown_runner', "runner = dict(type='EpochBasedRuner')", 'runner.type',
     "'EpochBasedRunner'"),
    ('unknown_dataset', "data = dict(train=dict(type='DigitDataset'))", 'data.train.type',
     "'DigitsDataset'"),
    ('unknown_lr_policy', "lr_config = dict(_delete_=True, policy='cosine')", 'lr_config.policy',
     'CosineAnnealing'),
    ('unknown_custom_hook', "custom_hooks = [dict(type='EarlyStopingHook')]",
     'custom_hooks.0.type', "'EarlyStoppingHook'"),
    ('unknown_logger_hook', "log_config = dict(hooks=[dict(type='TextLogerHook')])",
     'log_config.hooks.0.type', "'TextLoggerHook'"),
    ('unknown_processor', "batch_processor = dict(type='BasicProcessor')",
     'batch_processor.type', "'BasicBatchProcessor'"),
    ('max_epoch_typo', "runner = dict(max_epoch=3)", 'runner.max_epoch', "'max_epochs'"),
    ('max_iter_typo', "runner = dict(_delete_=True, type='IterBasedRunner', max_iter=3)",
     'runner.max_iter', "'max_iters'"),
    ('samples_per_gpus', "data = dict(samples_per_gpus=2)", 'data.samples_per_gpus',
     "'samples_per_gpu'"),
    ('workers_per_gpus', "data = dict(workers_per_gpus=2)", 'data.workers_per_gpus',
     "'workers_per_gpu'"),
    ('lr_confg', "lr_confg = dict(policy='step')", 'lr_confg', "'lr_config'"),
    ('optimizer_confg', "optimizer_confg = dict()", 'optimizer_confg', "'optimizer_config'"),
    ('checkpoint_confg', "checkpoint_confg = dict()", 'checkpoint_confg',
     "'checkpoint_config'"),
    ('momentum_cfg', "momentum_confg = dict()", 'momentum_confg', "'momentum_config'"),
    ('grad_clip_typo', "optimizer_config = dict(grad_clipp=None)", 'optimizer_config.grad_clipp',
     "'grad_clip'"),
    ('cumulative_typo', "optimizer_config = dict(type='GradientCumulativeOptimizerHook', "
     "cumulative_iter=2)", 'optimizer_config.cumulative_iter', "'cumulative_iters'"),
    ('checkpoint_interval_typo', "checkpoint_config = dict(intervall=1)",
     'checkpoint_config.intervall', "'interval'"),
    ('eval_interval_typo', "evaluation = dict(intervall=1)", 'evaluation.intervall',
     "'interval'"),
    ('warmup_typo', "lr_config = dict(warmup_iter=5)", 'lr_config.warmup_iter', "'warmup_iters'"),
    ('max_epochs_str', "runner = dict(max_epochs='3')", 'runner', 'positive integer'),
    ('max_epochs_zero', "runner = dict(max_epochs=0)", 'runner', 'positive integer'),
    ('checkpoint_interval_zero', "checkpoint_config = dict(interval=0)", 'checkpoint_config',
     'positive integer'),
    ('log_interval_zero', "log_config = dict(interval=0)", 'log_config.hooks.0',
     'positive integer'),
    ('eval_interval_zero', "evaluation = dict(interval=0)", 'evaluation', 'positive integer'),
    ('samples_per_gpu_zero', "data = dict(samples_per_gpu=0)", 'data', 'positive'),
    ('micro_batch_value', "optimizer_config = dict(micro_batch='half')", 'optimizer_config',
     "'auto'"),
    ('cumulative_zero', "optimizer_config = dict(type='GradientCumulativeOptimizerHook', "
     "cumulative_iters=0)", 'optimizer_config', 'positive integer'),
    ('bad_priority', "custom_hooks = [dict(type='EarlyStoppingHook', priority='MEDIUM')]",
     'custom_hooks.0', 'NORMAL'),
    ('nan_action', "nan_policy = dict(action='ignore')", 'nan_policy', "'skip'"),
    ('negative_lr', "optimizer = dict(lr=-0.1)", 'optimizer.lr', 'cannot be negative'),
    ('paramwise_typo', "optimizer = dict(paramwise_cfg=dict(norm_decay_mul=0.))",
     'optimizer.paramwise_cfg.norm_decay_mul', "'norm_decay_mult'"),
    # A custom key that matches no parameter is only a warning, as in mmcv (issue 14).
    ('custom_key_field_typo',
     "optimizer = dict(paramwise_cfg=dict(custom_keys={'head': dict(lr_mul=0.1)}))",
     'optimizer.paramwise_cfg.custom_keys.head.lr_mul', "'lr_mult'"),
    ('model_not_dict', "model = 'LeNet'", 'model', 'expected a dict'),
    ('no_type', "optimizer = dict(_delete_=True, lr=0.1)", 'optimizer', 'no `type`'),
    ('bad_workflow', "workflow = [('tran', 1)]", 'workflow', "'train'"),
    ('device_cuda', "device = 'cuda'", 'device', "device='cpu'"),
    ('missing_base', "_base_ = ['./does_not_exist.py']", '_base_', 'does_not_exist'),
    ('cyclic_base', "_base_ = ['./cyclic_base.py']", '_base_', 'cycle'),
    ('failing_custom_import', "custom_imports = dict(imports=['no_such_module_xyz'])",
     'custom_imports', 'importable'),
]


def _write(tmp_path, name, body, root):
    path = tmp_path / f'{name}.py'
    base = '' if body.startswith('_base_') else BASE.format(root=root)
    path.write_text(base + textwrap.dedent(body) + '\n')
    return str(path)


@pytest.mark.parametrize('name,body,key,hint', CASES, ids=[c[0] for c in CASES])
def test_broken_config_fails_early_with_file_key_and_hint(train_tool, repo_root, tmp_path, capsys,
                                                          name, body, key, hint):
    if name == 'device_cuda':
        import torch
        if torch.cuda.is_available():
            pytest.skip('CUDA is available here')
    cfg = _write(tmp_path, name, body, repo_root)
    work_dir = tmp_path / 'work'
    code = train_tool.main([cfg, '--work-dir', str(work_dir)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f'{name}.py' in err, err
    assert key in err, err
    assert hint in err, err
    message = err[err.index('error:'):]
    assert len(message.splitlines()) <= 3 and 'Traceback' not in err, err  # short, no traceback
    produced = os.listdir(work_dir) if work_dir.exists() else []
    assert not [n for n in produced if n.endswith('.pth')], produced


def test_corpus_is_large_enough():
    assert len(CASES) >= 30


def test_debug_flag_shows_the_traceback(train_tool, repo_root, tmp_path):
    from mtrain.utils import ConfigError
    cfg = _write(tmp_path, 'dbg', "model = dict(type='LeNett')", repo_root)
    with pytest.raises(ConfigError):
        train_tool.main([cfg, '--work-dir', str(tmp_path / 'w'), '--debug'])


def test_malformed_cfg_options(train_tool, repo_root, tmp_path, capsys):
    code = train_tool.main([f'{repo_root}/configs/digits/lenet_digits.py', '--work-dir',
                            str(tmp_path), '--cfg-options', 'optimizer.lr'])
    assert code == 2 and 'key=value' in capsys.readouterr().err
