"""tools/analyze_logs.py on a real work dir and on an mmcv 1.x-era log."""

import json
import os

import matplotlib.image
import pytest

from mtrain.datasets import build_dataloader
from mtrain.hooks import EvalHook, IterTimerHook, OptimizerHook, TextLoggerHook

# What an mmdet 2.x run wrote (mmcv 1.x TextLoggerHook): a meta line, train lines with
# `memory`, val lines whose `iter` is the val loader's length.
MMCV_LOG = [
    {'env_info': 'sys.platform: linux\nPyTorch: 1.10.0',
     'config': "model = dict(type='FasterRCNN')", 'seed': 0,
     'exp_name': 'faster_rcnn_r50_fpn_1x_coco.py', 'mmdet_version': '2.25.0'},
    {'mode': 'train', 'epoch': 1, 'iter': 50, 'lr': 0.00198, 'memory': 3834, 'data_time': 0.05,
     'loss_rpn_cls': 0.5, 'loss_cls': 1.0, 'loss': 2.0, 'time': 0.90},
    {'mode': 'train', 'epoch': 1, 'iter': 100, 'lr': 0.00398, 'memory': 3834, 'data_time': 0.01,
     'loss_rpn_cls': 0.3, 'loss_cls': 0.8, 'loss': 1.5, 'time': 0.50},
    {'mode': 'train', 'epoch': 1, 'iter': 150, 'lr': 0.00598, 'memory': 3834, 'data_time': 0.01,
     'loss_rpn_cls': 0.2, 'loss_cls': 0.7, 'loss': 1.2, 'time': 0.40},
    {'mode': 'val', 'epoch': 1, 'iter': 500, 'lr': 0.00598, 'bbox_mAP': 0.101,
     'bbox_mAP_copypaste': '0.101 0.200'},
    {'mode': 'train', 'epoch': 2, 'iter': 50, 'lr': 0.02, 'memory': 3834, 'data_time': 0.04,
     'loss_rpn_cls': 0.1, 'loss_cls': 0.6, 'loss': 1.0, 'time': 0.80},
    {'mode': 'train', 'epoch': 2, 'iter': 100, 'lr': 0.02, 'memory': 3834, 'data_time': 0.01,
     'loss_rpn_cls': 0.1, 'loss_cls': 0.5, 'loss': 0.9, 'time': 0.60},
    {'mode': 'train', 'epoch': 2, 'iter': 150, 'lr': 0.02, 'memory': 3834, 'data_time': 0.01,
     'loss_rpn_cls': 0.1, 'loss_cls': 0.5, 'loss': 0.8, 'time': 0.70},
    {'mode': 'val', 'epoch': 2, 'iter': 500, 'lr': 0.02, 'bbox_mAP': 0.152,
     'bbox_mAP_copypaste': '0.152 0.300'},
]


@pytest.fixture(scope='module')
def analyze_logs(tool):
    return tool('analyze_logs')


@pytest.fixture
def work_dir_log(make_runner, toy_loader, toy_dataset, tmp_path):
    """A real run: 3 epochs of 8 iterations, a line every 2 iterations, eval every epoch."""
    runner = make_runner(max_len=3)
    runner.register_hook(OptimizerHook())
    runner.register_hook(IterTimerHook(), 'LOW')
    runner.register_hook(EvalHook(build_dataloader(toy_dataset, 16, 0, shuffle=False)), 'LOW')
    runner.register_hook(TextLoggerHook(interval=2), 'VERY_LOW')
    runner.run([toy_loader], [('train', 1)])
    [name] = [n for n in os.listdir(tmp_path) if n.endswith('.log.json')]
    return str(tmp_path / name)


def _assert_png(path, height, width):
    with open(path, 'rb') as f:
        assert f.read(8) == b'\x89PNG\r\n\x1a\n'
    image = matplotlib.image.imread(path)
    assert image.shape[:2] == (height, width) and image.std() > 0  # not a blank canvas


def test_plot_curve_of_a_real_work_dir(analyze_logs, work_dir_log, tmp_path, capsys):
    out = tmp_path / 'curves.png'
    assert analyze_logs.main(['plot_curve', work_dir_log, '--keys', 'loss', 'accuracy',
                              '--out', str(out), '--title', 'toy']) == 0
    _assert_png(out, 600, 800)  # two 8x3-inch panels at 100 dpi
    records = analyze_logs.load_json_log(work_dir_log)
    xs, ys, label = analyze_logs.series(records, 'loss')
    assert label == 'iter' and xs == list(range(2, 25, 2))  # over the run, not the epoch
    assert ys == [r['loss'] for r in records if r['mode'] == 'train']
    xs, ys, label = analyze_logs.series(records, 'accuracy')
    assert label == 'epoch' and xs == [1, 2, 3]
    assert ys == [r['accuracy'] for r in records if r['mode'] == 'val']


def test_cal_train_time_of_a_real_work_dir(analyze_logs, work_dir_log, capsys):
    assert analyze_logs.main(['cal_train_time', work_dir_log]) == 0
    text = capsys.readouterr().out
    times = {}
    for r in analyze_logs.load_json_log(work_dir_log):
        if r['mode'] == 'train':
            times.setdefault(r['epoch'], []).append(r['time'])
    overall = [t for epoch in times.values() for t in epoch[1:]]
    assert f'average iter time: {sum(overall) / len(overall):.4f} s/iter' in text
    assert text.count('epoch') >= 2 and 'time std over epochs is' in text


def test_an_mmcv_1x_era_log(analyze_logs, tmp_path, capsys):
    log = tmp_path / '20220101_000000.log.json'
    log.write_text(''.join(json.dumps(r) + '\n' for r in MMCV_LOG))
    records = analyze_logs.load_json_log(str(log))
    assert len(records) == 8  # the meta line is skipped
    assert analyze_logs.series(records, 'loss')[0] == [50, 100, 150, 200, 250, 300]
    assert analyze_logs.series(records, 'bbox_mAP') == ([1, 2], [0.101, 0.152], 'epoch')
    out = tmp_path / 'map.png'
    assert analyze_logs.main(['plot_curve', str(log), str(log), '--keys', 'loss_cls',
                              'bbox_mAP', '--legend', 'a', 'b', '--out', str(out)]) == 0
    _assert_png(out, 600, 800)
    assert analyze_logs.main(['cal_train_time', str(log)]) == 0
    text = capsys.readouterr().out
    # Without each epoch's first line: epoch 1 averages 0.45, epoch 2 0.65.
    assert 'slowest epoch 2, average time is 0.6500 s/iter' in text
    assert 'fastest epoch 1, average time is 0.4500 s/iter' in text
    assert 'time std over epochs is 0.1000' in text and 'average iter time: 0.5500' in text
    assert analyze_logs.main(['cal_train_time', str(log), '--include-outliers']) == 0
    assert 'slowest epoch 2, average time is 0.7000' in capsys.readouterr().out


def test_iteration_based_log_and_clear_errors(analyze_logs, make_runner, toy_loader,
                                              tmp_path, capsys):
    runner = make_runner(by_epoch=False, max_len=20)
    runner.register_hook(OptimizerHook())
    runner.register_hook(IterTimerHook(), 'LOW')
    runner.register_hook(TextLoggerHook(interval=5, by_epoch=False), 'VERY_LOW')
    runner.run([toy_loader], [('train', 1)])
    [name] = [n for n in os.listdir(tmp_path) if n.endswith('.log.json')]
    records = analyze_logs.load_json_log(str(tmp_path / name))
    assert {r['epoch'] for r in records} == {1, 2, 3}  # 8 batches per pass
    assert analyze_logs.series(records, 'loss')[0] == [5, 10, 15, 20]  # already global
    assert analyze_logs.main(['plot_curve', str(tmp_path / name), '--legend', 'a', 'b']) == 2
    assert '--legend gives 2 names for 1 logs' in capsys.readouterr().err
    bad = tmp_path / 'bad.log.json'
    bad.write_text('{"mode": "train"\n')
    assert analyze_logs.main(['cal_train_time', str(bad)]) == 2
    assert 'line 1 is not JSON' in capsys.readouterr().err
