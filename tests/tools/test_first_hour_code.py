"""The first hour, round two (issue 24): mistakes in a user's own code and settings.

Each mistake fails before training (or at the first use of the faulty piece)
with one message naming the user's file, class or config key and the fix,
and no traceback. Most tests call the checks directly or stop at
``--check-config``; a few run the digits demo end to end.
"""

import json
import os
import pickle
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from mtrain.config import load_config
from mtrain.config_checks import val_phase_dataset
from mtrain.datasets import DigitsDataset, build_dataloader
from mtrain.hooks import DistEvalHook
from mtrain.hooks.eval_checks import check_eval_results
from mtrain.runner.preflight import Preflight, check_items_collate
from mtrain.utils import ConfigError
from mtrain.utils.data_container import DataContainer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIGITS = os.path.join(ROOT, 'configs', 'digits', 'lenet_digits.py')
FAST = ('data.samples_per_gpu=256', 'runner.max_epochs=1')  # 6 iterations an epoch

USER_MODULE = '''
import numpy as np
import torch
from torch import nn
from mtrain.registry import DATASETS, MODELS
from mtrain.datasets import DigitsDataset, build_dataloader


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 10)

    def losses(self, data):
        return nn.functional.cross_entropy(self.fc(data['img'].flatten(1)), data['gt_label'])


@MODELS.register_module(force=True)
class TotalLossNet(_Net):
    def train_step(self, data, optimizer):
        loss = self.losses(data)
        return dict(total_loss=loss, log_vars=dict(loss=loss.detach()), num_samples=8)


@MODELS.register_module(force=True)
class NoSamplesNet(_Net):
    def train_step(self, data, optimizer):
        loss = self.losses(data)
        return dict(loss=loss, log_vars=dict(loss=loss.detach()))


@MODELS.register_module(force=True)
class ItemLossNet(_Net):
    def train_step(self, data, optimizer):
        loss = self.losses(data)
        return dict(loss=loss.item(), log_vars=dict(loss=loss.item()), num_samples=8)


@MODELS.register_module(force=True)
class FloatLossNet(_Net):
    def forward(self, img, gt_label=None):
        logits = self.fc(img.flatten(1))
        if self.training:
            return {'loss': nn.functional.cross_entropy(logits, gt_label).item()}
        return logits


@DATASETS.register_module(force=True)
class ArrayMetricDigits(DigitsDataset):
    def evaluate(self, results, metric='accuracy', logger=None):
        right = (results.argmax(1) == self.labels).numpy()
        per_class = np.array([right[self.labels.numpy() == c].mean() for c in range(10)])
        return {'accuracy': np.float32(right.mean()), 'recall': per_class,
                'top': torch.tensor(right.mean())}


@DATASETS.register_module(force=True)
class ListMetricDigits(DigitsDataset):
    def evaluate(self, results, metric='accuracy', logger=None):
        return [('accuracy', 0.5)]


@DATASETS.register_module(force=True)
class SubmissionDigits(DigitsDataset):
    def format_results(self, results, out_file='submission.txt'):
        with open(out_file, 'w') as f:
            f.writelines(f'{int(r.argmax())}\\n' for r in results)
'''


@pytest.fixture
def user_config(tmp_path, monkeypatch):
    """``user_config(body)``: a config over the digits demo importing the user module above."""
    module = f'first_hour_code_{os.path.basename(tmp_path)}'.replace('-', '_')
    (tmp_path / f'{module}.py').write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))

    def make(body: str, name: str = 'user_cfg.py') -> str:
        path = tmp_path / name
        path.write_text(f"_base_ = ['{DIGITS}']\ncustom_imports = dict(imports=['{module}'])\n"
                        + textwrap.dedent(body))
        return str(path)
    return make


def _train(train_tool, config, work_dir, *options, flags=()):
    argv = [config, '--work-dir', str(work_dir), *flags]
    return train_tool.main(argv + (['--cfg-options', *options] if options else []))


def _no_checkpoint(work_dir):
    return not [n for n in os.listdir(work_dir) if n.endswith('.pth')]


def _config_error(path):
    with pytest.raises(ConfigError) as error:
        load_config(str(path))
    return str(error.value)


# -- silently wrong ------------------------------------------------------------
def test_total_epochs_disagreeing_with_the_runner_is_an_error(tmp_path):
    config = tmp_path / 'short.py'
    config.write_text(f"_base_ = ['{DIGITS}']\ntotal_epochs = 1\n")  # the base: max_epochs=10
    message = _config_error(config)
    assert f'{config}, key `total_epochs`' in message
    assert 'disagrees with runner.max_epochs=10' in message
    assert 'runner = dict(max_epochs=1)' in message
    config.write_text(f"_base_ = ['{DIGITS}']\ntotal_epochs = 10\n")
    assert load_config(str(config)).total_epochs == 10  # agreeing: as mmdet 2.x


# -- config shapes ---------------------------------------------------------------
def test_a_workflow_tuple_says_to_write_a_list(tmp_path):
    config = tmp_path / 'flow.py'
    config.write_text(f"_base_ = ['{DIGITS}']\nworkflow = ('train', 1)\n")
    message = _config_error(config)
    assert 'key `workflow`' in message and "workflow = [('train', 1)]" in message


@pytest.mark.parametrize('module, line, expected', [
    ('leftover_mmcv', 'from torch.nn import Linearr', "ImportError: cannot import name 'Linearr'"),
    # Not an ImportError (e.g. print_log with a logger it does not take): the user's line too.
    ('setup_hooks', "TABLE = dict(a=1)['b']", 'KeyError'),
])
def test_custom_imports_show_the_line_that_failed(tmp_path, monkeypatch, module, line, expected):
    (tmp_path / f'{module}.py').write_text(f'import os\n{line}\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    config = tmp_path / 'imports.py'
    config.write_text(f"_base_ = ['{DIGITS}']\ncustom_imports = dict(imports=['{module}'])\n")
    message = _config_error(config)
    assert f"{tmp_path / f'{module}.py'}, line 2: {line} -> {expected}" in message


def test_load_from_a_directory_or_a_url_says_what_to_do(train_tool, tmp_path, capsys):
    (tmp_path / 'old').mkdir()
    (tmp_path / 'old' / 'epoch_3.pth').write_bytes(b'')
    assert _train(train_tool, DIGITS, tmp_path, flags=('--load-from', str(tmp_path / 'old'))) == 2
    err = capsys.readouterr().err
    assert '--load-from, key `load_from`' in err and 'is a directory' in err
    assert 'epoch_3.pth' in err and 'Traceback' not in err
    url = 'https://download.example.org/lenet_20230101.pth'
    assert _train(train_tool, DIGITS, tmp_path, f'load_from={url}') == 2
    err = capsys.readouterr().err
    assert 'key `load_from`' in err and f'wget -P checkpoints {url}' in err
    assert 'load_from=checkpoints/lenet_20230101.pth' in err and _no_checkpoint(tmp_path)


# -- the model's own step ----------------------------------------------------------
@pytest.mark.parametrize('model, expected', [
    ('TotalLossNet', "rename 'total_loss' to loss"),
    ('NoSamplesNet', 'log_vars with no num_samples'),
    ('ItemLossNet', 'returned loss as a float'),
    ('FloatLossNet', "returned 'loss' as a float"),
])
def test_check_config_runs_the_model_and_names_its_contract_mistake(
        train_tool, tmp_path, user_config, capsys, model, expected):
    config = user_config(f"model = dict(_delete_=True, type='{model}')\n")
    assert _train(train_tool, config, tmp_path, flags=('--check-config', )) == 2
    err = capsys.readouterr().err
    assert 'key `model`' in err and expected in err and 'Traceback' not in err
    assert _no_checkpoint(tmp_path)


def test_a_contract_mistake_stops_training_at_iteration_1(train_tool, tmp_path, user_config,
                                                          capsys):
    config = user_config("model = dict(_delete_=True, type='NoSamplesNet')\n")
    assert _train(train_tool, config, tmp_path, *FAST) == 2
    err = capsys.readouterr().err
    assert 'NoSamplesNet.train_step returned log_vars with no num_samples' in err
    assert "num_samples=len(data['img_metas'])" in err and 'Traceback' not in err


def test_check_config_passes_a_good_config_after_running_both_modes(train_tool, tmp_path,
                                                                    capsys):
    assert _train(train_tool, DIGITS, tmp_path, flags=('--check-config', )) == 0
    out = capsys.readouterr().out
    assert 'config check passed: built LeNet' in out and 'train, evaluation' in out
    assert 'one train batch (no update) and one val batch' in out and _no_checkpoint(tmp_path)


def test_check_config_builds_the_model_and_runs_the_preflight(train_tool, tmp_path, capsys):
    assert _train(train_tool, DIGITS, tmp_path, 'model.num_classes=5',
                  flags=('--check-config', )) == 2
    err = capsys.readouterr().err
    assert 'key `model.num_classes`' in err and 'model.num_classes=10' in err


def test_grad_clip_keys_are_clip_grad_norm_arguments(train_tool, tmp_path, capsys):
    config = tmp_path / 'clip.py'
    config.write_text(f"_base_ = ['{DIGITS}']\n"
                      'optimizer_config = dict(grad_clip=dict(_delete_=True, max_norm=35, norm_typ=2))\n')
    assert _train(train_tool, str(config), tmp_path, flags=('--check-config', )) == 2
    err = capsys.readouterr().err
    assert f'{config}, key `optimizer_config.grad_clip.norm_typ`' in err
    assert "Did you mean 'norm_type'?" in err and 'Traceback' not in err


# -- batching ----------------------------------------------------------------------
class _MetaDigits(DigitsDataset):
    def __init__(self, meta):
        super().__init__('val')
        self.meta = meta

    def __getitem__(self, i):
        return dict(super().__getitem__(i), img_metas=dict(self.meta, index=i))


class _Contained(_MetaDigits):
    def __getitem__(self, i):
        item = super().__getitem__(i)
        return dict(item, img_metas=DataContainer(item['img_metas'], cpu_only=True))


@pytest.mark.parametrize('meta, expected', [
    (dict(filename='a.png', flip=None), "cannot batch the key 'img_metas'"),
    (dict(filename='a.png', ori_shape=(8, 8)), 'merges them into ONE dict of lists'),
])
def test_metas_without_a_collate_fn_name_the_key(meta, expected):
    loader = build_dataloader(_MetaDigits(meta), samples_per_gpu=2, workers_per_gpu=0,
                              shuffle=False)
    with pytest.raises(ConfigError) as error:
        check_items_collate(Preflight(runner=None, datasets={}, train_loader=loader))
    message = str(error.value)
    assert message.startswith('key `data.train`: _MetaDigits:') and expected in message
    assert 'DataContainer(value, cpu_only=True)' in message
    # The fixes: a collate_fn of one's own, or mmcv's DataContainer (mtrain's loaders batch it).
    good = DataLoader(_MetaDigits(meta), batch_size=2, collate_fn=lambda items: items)
    check_items_collate(Preflight(runner=None, datasets={}, train_loader=good))
    contained = build_dataloader(_Contained(meta), samples_per_gpu=2, workers_per_gpu=0,
                                 shuffle=False)
    check_items_collate(Preflight(runner=None, datasets={}, train_loader=contained))


# -- evaluation results ------------------------------------------------------------------
def test_evaluate_results_become_plain_numbers_or_fail_naming_the_method():
    dataset = DigitsDataset('val')
    plain = check_eval_results({'a': np.float32(0.5), 'b': np.arange(3), 'c': torch.tensor(0.25),
                                'd': 'copy paste', 'e': 2}, dataset)
    assert plain == {'a': 0.5, 'b': [0, 1, 2], 'c': 0.25, 'd': 'copy paste', 'e': 2}
    assert type(plain['a']) is np.float32  # kept: the json log writes it unrounded, as mmcv
    with pytest.raises(ConfigError, match=r'key `data.val`: DigitsDataset.evaluate returned a '
                                          r"list .*it must return a dict of metric name"):
        check_eval_results([('accuracy', 0.5)], dataset)


def test_numpy_metrics_are_logged_and_a_list_is_a_clear_error(train_tool, tmp_path, user_config,
                                                               capsys):
    config = user_config("data = dict(val=dict(type='ArrayMetricDigits'))\n")
    assert _train(train_tool, config, tmp_path / 'arrays', *FAST,
                  'evaluation.save_best=accuracy') == 0
    [log] = [n for n in os.listdir(tmp_path / 'arrays') if n.endswith('.log.json')]
    with open(tmp_path / 'arrays' / log) as f:
        [val] = [r for r in map(json.loads, f) if r.get('mode') == 'val']
    assert isinstance(val['accuracy'], float) and len(val['recall']) == 10
    assert val['top'] == pytest.approx(val['accuracy'], abs=1e-4)
    config = user_config("data = dict(val=dict(type='ListMetricDigits'))\n", 'list_cfg.py')
    assert _train(train_tool, config, tmp_path / 'list', *FAST) == 2
    err = capsys.readouterr().err
    assert 'key `data.val`: ListMetricDigits.evaluate returned a list' in err
    assert 'Traceback' not in err


# -- the end of a run ---------------------------------------------------------------------
def test_val_phase_lines_are_not_evaluations_in_the_summary(train_tool, tmp_path):
    assert _train(train_tool, DIGITS, tmp_path, 'data.samples_per_gpu=256',
                  'runner.max_epochs=2', "workflow=[('train',1),('val',1)]",
                  'evaluation.save_best=accuracy') == 0
    [log] = [n for n in os.listdir(tmp_path) if n.endswith('.log')]
    text = (tmp_path / log).read_text()
    assert "workflow phase ('val', N) computes the losses on data.val" in text
    summary = text[text.index('Finished:'):]
    assert 'best accuracy: ' in summary and 'data_time' not in summary
    assert '--keys loss accuracy' in summary
    with open(tmp_path / log.replace('.log', '.log.json')) as f:
        meta = json.loads(f.readline())
    assert meta['iters_per_epoch'] == 6  # for plot_curve's iteration axis


def test_the_summary_names_the_best_checkpoint_of_a_dist_eval_hook(train_tool, tmp_path):
    hook = DistEvalHook(DataLoader(DigitsDataset('val'), batch_size=64), save_best='accuracy')
    hook.best_ckpt_path = str(tmp_path / 'best_accuracy_epoch_2.pth')
    runner = types.SimpleNamespace(hooks=[hook], epoch=2, iter=12, work_dir=str(tmp_path),
                                   max_epochs=2)
    args = train_tool.parse_args([DIGITS])
    args.work_dir = str(tmp_path)
    lines = train_tool.summary_lines(runner, args)
    assert f'  best checkpoint (accuracy): {hook.best_ckpt_path}' in lines


def test_the_val_phase_reads_data_val_with_the_train_pipeline():
    train = dict(type='A', pipeline=['load', 'augment', 'collect_labels'])
    val = dict(type='A', ann_file='val.json', pipeline=['load', 'collect_img'])
    phase = val_phase_dataset(dict(train=train, val=val))
    assert phase == dict(type='A', ann_file='val.json', pipeline=train['pipeline'])
    assert val['pipeline'] == ['load', 'collect_img']  # a copy: evaluation keeps its own
    wrapped = dict(type='RepeatDataset', times=3, dataset=train)
    assert val_phase_dataset(dict(train=wrapped, val=val))['pipeline'] == train['pipeline']
    assert val_phase_dataset(dict(train=dict(type='B'), val=dict(type='B'))) == dict(type='B')


# -- tools ----------------------------------------------------------------------------------
def test_test_py_writes_raw_results_passes_eval_options_and_formats(test_tool, tmp_path,
                                                                     user_config, capsys):
    from mtrain.models import LeNet
    checkpoint = tmp_path / 'lenet.pth'
    torch.save({'state_dict': LeNet().state_dict()}, checkpoint)
    config = user_config("data = dict(test=dict(type='SubmissionDigits', split='val'))\n")
    out = tmp_path / 'out' / 'results.pkl'
    assert test_tool.main([config, str(checkpoint), '--out', str(out), '--eval-options',
                           "metric=['accuracy','precision']"]) == 0
    metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(metrics) == {'accuracy', 'precision'}
    with open(out, 'rb') as f:
        results = pickle.load(f)
    assert len(results) == len(DigitsDataset('val')) and results[0].shape == (10, )
    submission = tmp_path / 'submission.txt'
    assert test_tool.main([config, str(checkpoint), '--format-only', '--eval-options',
                           f'out_file={submission}']) == 0
    assert len(submission.read_text().splitlines()) == len(results)
    assert test_tool.main([DIGITS, str(checkpoint), '--format-only']) == 2
    assert 'DigitsDataset has no format_results' in capsys.readouterr().err


def test_plot_curve_uses_the_epoch_length_of_the_meta_line(tool, tmp_path):
    log = tmp_path / 'run.log.json'
    lines = [dict(env_info='x', iters_per_epoch=32)] + [
        dict(mode='train', epoch=e, iter=i, loss=1.0) for e in (1, 2) for i in (10, 20, 30)]
    log.write_text(''.join(json.dumps(r) + '\n' for r in lines))
    analyze = tool('analyze_logs')
    xs, _, label = analyze.series(analyze.load_json_log(str(log)), 'loss')
    assert xs == [10, 20, 30, 42, 52, 62] and label == 'iter'
    assert 'iters_per_epoch' not in analyze.logged_keys(analyze.load_json_log(str(log)))


def test_dist_train_sh_takes_a_python_command_with_arguments(tmp_path):
    env = dict(os.environ, PYTHON=f'{sys.executable} -X faulthandler')
    proc = subprocess.run([os.path.join(ROOT, 'tools', 'dist_train.sh'), DIGITS, '2',
                           '--work-dir', str(tmp_path), '--cfg-options', 'lr_confg.policy=step'],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "Did you mean 'lr_config'?" in proc.stderr


@pytest.mark.slow
def test_a_mistake_only_torchrun_meets_is_printed_once(tmp_path):
    """``model_wrapper`` is read only when distributed: it passes --check-config."""
    env = dict(os.environ, PYTHON=sys.executable)
    proc = subprocess.run([os.path.join(ROOT, 'tools', 'dist_train.sh'), DIGITS, '2',
                           '--work-dir', str(tmp_path), '--cfg-options',
                           'model_wrapper.type=NoSuchWrapper'],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count('NoSuchWrapper') == 1, proc.stderr
    assert 'ChildFailedError' not in proc.stderr and 'Root Cause' not in proc.stderr
