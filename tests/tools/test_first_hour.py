"""A newcomer's first hour (issue 17): each trap, as tools/train.py shows it to a user."""

import argparse
import fcntl
import json
import os
import pty
import shlex
import struct
import subprocess
import sys
import termios
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIGITS = os.path.join(ROOT, 'configs', 'digits', 'lenet_digits.py')

USER_MODULE = """
import torch
from torch import nn
from mtrain.registry import DATASETS, MODELS
from mtrain.datasets import DigitsDataset


@DATASETS.register_module(force=True)
class BareTensorDigits(DigitsDataset):
    def __getitem__(self, i):
        return super().__getitem__(i)['img']


@MODELS.register_module(force=True)
class CeOnlyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 10)

    def forward(self, img, gt_label=None):
        logits = self.fc(img.flatten(1))
        if self.training:
            return {'ce': nn.functional.cross_entropy(logits, gt_label)}
        return logits
"""


@pytest.fixture
def user_config(tmp_path, monkeypatch):
    """``user_config(name, body)``: a config over the digits demo importing a user module."""
    module = f'first_hour_{os.path.basename(tmp_path)}'.replace('-', '_')
    (tmp_path / f'{module}.py').write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))

    def make(body: str) -> str:
        path = tmp_path / 'user_cfg.py'
        path.write_text(f"_base_ = ['{DIGITS}']\ncustom_imports = dict(imports=['{module}'])\n"
                        + textwrap.dedent(body))
        return str(path)
    return make


def _train(train_tool, config, work_dir, *options):
    argv = [config, '--work-dir', str(work_dir)]
    return train_tool.main(argv + (['--cfg-options', *options] if options else []))


def _no_training_happened(work_dir):
    return not [n for n in os.listdir(work_dir) if n.endswith('.pth')]


def test_iter_based_runner_with_max_epochs_fails_before_training(train_tool, tmp_path, capsys):
    assert _train(train_tool, DIGITS, tmp_path, 'runner.type=IterBasedRunner') == 2
    err = capsys.readouterr().err
    assert 'key `runner.max_epochs`' in err and 'max_iters=450' in err
    assert 'Traceback' not in err and _no_training_happened(tmp_path)


def test_num_classes_below_the_dataset_classes_fails_before_training(train_tool, tmp_path,
                                                                     capsys):
    assert _train(train_tool, DIGITS, tmp_path, 'model.num_classes=5') == 2
    err = capsys.readouterr().err
    assert 'key `model.num_classes`' in err and 'has 10' in err and 'model.num_classes=10' in err
    assert 'Traceback' not in err and _no_training_happened(tmp_path)


def test_a_bare_tensor_dataset_is_blamed_not_the_model(train_tool, tmp_path, user_config, capsys):
    config = user_config("data = dict(train=dict(type='BareTensorDigits'))\n")
    assert _train(train_tool, config, tmp_path) == 2
    err = capsys.readouterr().err
    assert 'key `data.train`' in err and 'BareTensorDigits[0] is a bare tensor' in err
    assert 'needs gt_label' not in err and _no_training_happened(tmp_path)


def test_a_model_returning_no_loss_key_is_a_clear_error(train_tool, tmp_path, user_config,
                                                        capsys):
    config = user_config("model = dict(_delete_=True, type='CeOnlyNet')\n")
    assert _train(train_tool, config, tmp_path) == 2
    err = capsys.readouterr().err
    assert "key `model`: in train mode the model returned no entry whose key contains 'loss'" \
        in err and "['ce']" in err and 'Traceback' not in err


def _log_messages(work_dir):
    """The messages of the run's ``<timestamp>.log`` (the logger does not propagate to caplog)."""
    [log] = [n for n in os.listdir(work_dir) if n.endswith('.log')]
    with open(os.path.join(work_dir, log)) as f:
        return [line.split(' - ', 3)[-1].rstrip('\n') for line in f if ' - mtrain' in line]


def test_deterministic_in_the_config_is_what_the_log_says(train_tool, tmp_path):
    assert _train(train_tool, DIGITS, tmp_path, 'deterministic=True',
                  'runner.max_epochs=1', 'evaluation=None') == 0
    assert 'Set random seed to 0, deterministic: True' in _log_messages(tmp_path)


def test_a_nested_cfg_options_typo_is_blamed_on_the_flag(train_tool, tmp_path, capsys):
    assert _train(train_tool, DIGITS, tmp_path, 'runner.max_epoch=3') == 2
    err = capsys.readouterr().err
    assert "error: --cfg-options, key `runner.max_epoch`" in err
    assert "Did you mean 'max_epochs'?" in err


def test_dataset_argument_errors_name_their_key_once(train_tool, tmp_path, capsys):
    assert _train(train_tool, DIGITS, tmp_path, 'data.train.n=64') == 2
    err = capsys.readouterr().err
    assert 'key `data.train.n`' in err and 'data.train_dataloader' not in err


def test_the_run_ends_with_a_summary(train_tool, tmp_path):
    assert _train(train_tool, DIGITS, tmp_path, 'runner.max_epochs=2',
                  'evaluation.save_best=accuracy') == 0
    messages = _log_messages(tmp_path)
    summary = messages[messages.index(next(m for m in messages if m.startswith('Finished:'))):]
    assert summary == messages[-len(summary):]  # the last lines
    text = '\n'.join(summary)
    assert f'Work dir: {tmp_path}' in text and 'last evaluation: accuracy' in text
    assert 'best accuracy: ' in text and 'at epoch' in text
    assert f'best checkpoint (accuracy): {tmp_path}/best_accuracy_epoch_' in text
    assert f'last checkpoint: {tmp_path}/epoch_2.pth' in text
    longer = shlex.split(text.split('train longer: ', 1)[1].splitlines()[0])
    assert '--auto-resume' in longer and 'runner.max_epochs=<more>' in longer
    assert longer.count('runner.max_epochs=2') == 0 and str(tmp_path) in longer
    assert 'plot: python ' in text and '.log.json --keys loss accuracy' in text


def test_the_resume_command_keeps_every_argument_of_the_run(train_tool):
    args = train_tool.parse_args([DIGITS, '--seed', '3', '--no-validate', '--cfg-options',
                                  'optimizer.lr=0.01', "custom_hooks=[dict(type='EMAHook')]"])
    args.work_dir = 'work_dirs/mine'
    command = shlex.split(train_tool.resume_command(args))
    assert command[1].endswith('train.py') and command[2] == DIGITS
    assert command[command.index('--work-dir') + 1] == 'work_dirs/mine'
    assert command[command.index('--seed') + 1] == '3' and '--no-validate' in command
    assert '--auto-resume' in command
    assert command[-2:] == ['optimizer.lr=0.01', "custom_hooks=[dict(type='EMAHook')]"]
    assert isinstance(args, argparse.Namespace)


def test_registry_messages_name_the_registry_and_only_user_arguments(train_tool, tmp_path,
                                                                      capsys):
    assert _train(train_tool, DIGITS, tmp_path, 'optimizer.type=SGDD') == 2
    err = capsys.readouterr().err
    assert '<REGISTRY>' not in err and '@OPTIMIZERS.register_module()' in err
    assert _train(train_tool, DIGITS, tmp_path, 'runner.max_epoch=3') == 2
    accepted = capsys.readouterr().err.split('Accepted: ', 1)[1].split('.\n')[0].split(', ')
    assert sorted(accepted) == ['max_epochs', 'max_iters']  # no model, optimizer, logger, ... and once


def _run_in(terminal: bool, work_dir) -> str:
    """tools/train.py for one epoch, its stderr a pseudo-terminal or a pipe; what it wrote."""
    cmd = [sys.executable, os.path.join(ROOT, 'tools', 'train.py'), DIGITS, '--work-dir',
           str(work_dir), '--cfg-options', 'runner.max_epochs=1', 'evaluation=None']
    if not terminal:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300).stderr
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack('HHHH', 24, 120, 0, 0))  # 0x0 otherwise
    proc = subprocess.Popen(cmd, stdout=slave, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=300)
    os.close(master)
    return b''.join(chunks).decode(errors='replace')


def test_a_progress_bar_on_a_terminal_and_plain_lines_elsewhere(tmp_path):
    shown = _run_in(True, tmp_path / 'tty')
    assert '45/45' in shown and 'it/s' in shown and '\r' in shown  # a tqdm bar, redrawn
    assert 'Epoch [1][40/45]' in shown  # the log lines, above it
    plain = _run_in(False, tmp_path / 'pipe')
    assert '\r' not in plain and 'progress: 45/45 iters (100.0%)' in plain
    assert 'Epoch [1][40/45]' in plain


def test_dist_train_sh_reports_a_config_error_in_one_line(tmp_path):
    env = dict(os.environ, PYTHON=sys.executable)
    proc = subprocess.run([os.path.join(ROOT, 'tools', 'dist_train.sh'), DIGITS, '2', '--work-dir',
                           str(tmp_path), '--cfg-options', 'lr_confg.policy=step'], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert "Did you mean 'lr_config'?" in lines[0] and len(lines) == 2, proc.stderr
    assert 'ChildFailedError' not in proc.stderr


def test_an_epoch_shorter_than_the_log_interval_still_logs_its_loss(train_tool, tmp_path):
    assert _train(train_tool, DIGITS, tmp_path, 'data.samples_per_gpu=512', 'runner.max_epochs=2',
                  'evaluation=None') == 0  # 3 iterations per epoch, log interval 10
    [log] = [n for n in os.listdir(tmp_path) if n.endswith('.log.json')]
    with open(tmp_path / log) as f:
        train = [r for r in map(json.loads, f) if r.get('mode') == 'train']
    assert [(r['epoch'], r['iter']) for r in train] == [(1, 3), (2, 3)]
    assert all('loss' in r and 'time' in r for r in train)  # cal_train_time has lines to read


def test_cal_train_time_on_one_line_per_epoch_says_what_to_do(tool):
    records = [dict(mode='train', epoch=e, iter=3, time=0.5, loss=1.0) for e in (1, 2)]
    analyze = tool('analyze_logs')
    with pytest.raises(ValueError, match='one train line.*--include-outliers') as err:
        analyze.cal_train_time(records)
    assert 'IterTimerHook' not in str(err.value)
    assert analyze.cal_train_time(records, include_outliers=True)['slowest_time'] == 0.5
