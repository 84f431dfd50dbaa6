"""The Quick start demo, end to end: tools/train.py on the digits config."""

import json
import os

import torch


def test_digits_demo_reaches_97_percent(train_tool, repo_root, tmp_path):
    config = os.path.join(repo_root, 'configs', 'digits', 'lenet_digits.py')
    assert train_tool.main([config, '--work-dir', str(tmp_path)]) == 0
    [log] = [n for n in os.listdir(tmp_path) if n.endswith('.log.json')]
    with open(tmp_path / log) as f:
        records = [json.loads(line) for line in f]
    val = [r for r in records if r.get('mode') == 'val']
    assert len(val) == 10 and val[-1]['accuracy'] >= 0.97
    assert records[0]['seed'] == 0 and 'config' in records[0]
    assert os.readlink(tmp_path / 'latest.pth') == 'epoch_10.pth'
    assert (tmp_path / 'lenet_digits.py').exists()  # the merged config is dumped


def test_test_tool_evaluates_a_checkpoint(train_tool, test_tool, repo_root, tmp_path, capsys):
    config = os.path.join(repo_root, 'configs', 'digits', 'lenet_digits.py')
    assert train_tool.main([config, '--work-dir', str(tmp_path), '--cfg-options',
                            'runner.max_epochs=2']) == 0
    capsys.readouterr()
    assert test_tool.main([config, str(tmp_path / 'latest.pth')]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    ckpt = torch.load(tmp_path / 'latest.pth', weights_only=True)
    assert 0.5 < result['accuracy'] <= 1 and ckpt['meta']['epoch'] == 2


def test_iter_based_runner_with_by_epoch_schedule(train_tool, repo_root, tmp_path):
    config = os.path.join(repo_root, 'configs', 'digits', 'lenet_digits.py')
    code = train_tool.main([config, '--work-dir', str(tmp_path), '--cfg-options',
                            'runner.type=IterBasedRunner', 'runner.max_epochs=None',
                            'runner.max_iters=90', 'checkpoint_config.by_epoch=False',
                            'checkpoint_config.interval=45', 'log_config.hooks.0.by_epoch=False',
                            'evaluation.interval=45'])
    assert code == 0
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith('iter_')) == \
        ['iter_45.pth', 'iter_90.pth']


def test_mmengine_demo_with_custom_hooks_keeps_its_warmup(train_tool, repo_root, tmp_path):
    """Issue 33, the worst one, through tools/train.py: with custom_hooks (here an EMAHook)
    the mmengine config's warmup + cosine still runs (it trained at a constant lr)."""
    config = os.path.join(repo_root, 'configs', 'digits', 'lenet_digits_mmengine.py')
    assert train_tool.main([config, '--work-dir', str(tmp_path), '--cfg-options',
                            'train_cfg.max_epochs=1', 'default_hooks.logger.interval=5',
                            "custom_hooks=[dict(type='EMAHook', momentum=0.001)]"]) == 0
    [log] = [n for n in os.listdir(tmp_path) if n.endswith('.log.json')]
    with open(tmp_path / log) as f:
        lrs = [r['lr'] for r in map(json.loads, f) if r.get('mode') == 'train']
    # LinearLR from 0.1 x 0.1 to 0.1 over 20 iterations: logged at iterations 5, 10, ...
    assert lrs[:4] == sorted(lrs[:4]) and lrs[0] < 0.04 and max(lrs) == 0.1, lrs
