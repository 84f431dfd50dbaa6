"""tools/convert_config.py end to end, and tools/train.py on an mmengine-schema config."""

import json
import os

import torch
from throwaway_package import write_package


def _records(work_dir):
    [log] = [n for n in os.listdir(work_dir) if n.endswith('.log.json')]
    with open(os.path.join(work_dir, log)) as f:
        return [json.loads(line) for line in f]


def test_digits_config_converts_both_ways_exactly(tool, repo_root, tmp_path, capsys):
    convert = tool('convert_config')
    source = os.path.join(repo_root, 'configs', 'digits', 'lenet_digits.py')
    engine_file, back_file = tmp_path / 'engine.py', tmp_path / 'back.py'
    assert convert.main([source, '--to', 'mmengine', '--out', str(engine_file)]) == 0
    assert '0 lossy' in capsys.readouterr().err
    assert convert.main([str(engine_file), '--to', 'mmcv', '--out', str(back_file)]) == 0
    text = back_file.read_text()
    assert "policy='CosineAnnealing'" in text and 'warmup_iters=20' in text


def test_lossy_conversion_exits_nonzero_unless_allowed(tool, tmp_path, capsys):
    convert = tool('convert_config')
    config = tmp_path / 'inv.py'
    config.write_text("model = dict(type='LeNet')\noptimizer = dict(type='SGD', lr=0.1)\n"
                      "lr_config = dict(policy='Inv', gamma=0.1, power=0.5)\n"
                      "runner = dict(type='IterBasedRunner', max_iters=100)\n")
    assert convert.main([str(config), '--to', 'mmengine']) == 1
    err = capsys.readouterr().err
    assert "[lossy] lr_config.policy='Inv'" in err and 'no scheduler for lr' in err
    assert convert.main([str(config), '--to', 'mmengine', '--allow-lossy']) == 0
    assert convert.main([str(config), '--to', 'mmengine', '--metric-class', 'mAP']) == 2
    assert '--metric-class' in capsys.readouterr().err


def test_metric_class_flag_names_the_evaluator(tool, tmp_path, capsys):
    convert = tool('convert_config')
    config, out = tmp_path / 'det.py', tmp_path / 'out.py'
    config.write_text("model = dict(type='LeNet')\noptimizer = dict(type='SGD', lr=0.1)\n"
                      "runner = dict(type='EpochBasedRunner', max_epochs=2)\n"
                      "data = dict(train=dict(type='T'), val=dict(type='V'))\n"
                      "evaluation = dict(interval=1, metric='mAP')\n")
    assert convert.main([str(config), '--to', 'mmengine', '--out', str(out),
                         '--metric-class', 'mAP=MyBoxAP']) == 0
    assert "val_evaluator = dict(metric='mAP', type='MyBoxAP')" in out.read_text()


def test_train_tool_runs_an_mmengine_config(train_tool, repo_root, tmp_path):
    config = os.path.join(repo_root, 'configs', 'digits', 'lenet_digits_mmengine.py')
    assert train_tool.main([config, '--work-dir', str(tmp_path), '--cfg-options',
                            'train_cfg.max_epochs=1', 'param_scheduler.1.end=1',
                            'param_scheduler.1.T_max=1']) == 0
    records = _records(tmp_path)
    train = [r for r in records if r.get('mode') == 'train']
    val = [r for r in records if r.get('mode') == 'val']
    # LinearLR(start_factor=0.1, end=21) at iteration 10: 0.1 * (0.1 + 0.9 * 9 / 20)
    assert abs(train[0]['lr'] - 0.1 * (0.1 + 0.9 * 9 / 20)) < 1e-9
    assert len(val) == 1 and val[-1]['accuracy'] > 0.3  # chance: 0.1
    ckpt = torch.load(tmp_path / 'latest.pth', weights_only=True)
    assert ckpt['meta']['epoch'] == 1


def test_train_tool_names_an_unsupported_mmengine_key(train_tool, tmp_path, capsys):
    config = tmp_path / 'strategy.py'
    config.write_text("model = dict(type='LeNet')\n"
                      "optim_wrapper = dict(optimizer=dict(type='SGD', lr=0.1))\n"
                      "train_cfg = dict(max_epochs=1)\n"
                      "strategy = dict(type='DeepSpeedStrategy')\n")
    assert train_tool.main([str(config), '--work-dir', str(tmp_path / 'w')]) == 2
    err = capsys.readouterr().err
    assert 'key `strategy`' in err and 'DeepSpeed' in err and 'Traceback' not in err


def test_mmseg_style_schedule_file_converts_with_the_tool(tool, tmp_path, capsys):
    (tmp_path / 'schedule.py').write_text(
        "optimizer = dict(type='SGD', lr=0.01, momentum=0.9, weight_decay=0.0005)\n"
        "optim_wrapper = dict(type='OptimWrapper', optimizer=optimizer, clip_grad=None)\n"
        "param_scheduler = [dict(type='PolyLR', eta_min=1e-4, power=0.9, begin=0, end=160000,"
        " by_epoch=False)]\n"
        "train_cfg = dict(type='IterBasedTrainLoop', max_iters=160000, val_interval=16000)\n")
    (tmp_path / 'cfg.py').write_text("_base_ = ['schedule.py']\nmodel = dict(type='X')\n"
                                     "optim_wrapper = dict(optimizer=dict(lr=0.02))\n")
    out = tmp_path / 'out.py'
    assert tool('convert_config').main([str(tmp_path / 'cfg.py'), '--to', 'mmcv', '--out',
                                        str(out), '--allow-lossy']) == 0
    err = capsys.readouterr().err
    assert 'mixes' not in err and '[lossy] param_scheduler: PolyLR' in err  # one step off
    text = out.read_text()
    assert "lr=0.02" in text and "policy='poly'" in text


def test_a_package_scoped_base_converts_without_pkg_resources(tool, tmp_path, monkeypatch,
                                                              capsys):
    """Issue 33 item 12 through the converter: the package base is read, _scope_ dropped."""
    monkeypatch.syspath_prepend(str(write_package(tmp_path / 'site')))
    config = tmp_path / 'cfg.py'
    config.write_text("_base_ = ['mmyolo::_base_/schedule.py']\n")
    out = tmp_path / 'mmcv.py'
    assert tool('convert_config').main([str(config), '--to', 'mmcv', '--out', str(out),
                                        '--allow-lossy']) == 0
    text = out.read_text()
    assert "policy='step'" in text and '_scope_' not in text
    assert "[note] optim_wrapper._scope_ -> (dropped)" in capsys.readouterr().err
