"""mmcv 1.x's evaluation contract: an mmdet-2.x-style detector trained and evaluated on 1 and 2 ranks.

The toy detector returns per-class numpy arrays per image and the dataset
computes a real mAP from them (``toy_detector.py``). Training goes through
the real builder (``build_runner``), so a distributed run gets DistEvalHook.
"""

import json
import os
import os.path as osp
import sys

import numpy as np
import pytest
import torch
from mmengine.config import Config
from torch import nn

sys.path.insert(0, osp.join(osp.dirname(osp.abspath(__file__)), '..', 'parallel'))
from dist_launch import launch  # noqa: E402
from mtrain.datasets import build_dataloader  # noqa: E402
from mtrain.evaluation import multi_gpu_test, single_gpu_test, uses_mmcv_contract  # noqa: E402
from mtrain.evaluation.inference import eval_forward_kwargs  # noqa: E402
from mtrain.hooks import DistEvalHook, EvalHook  # noqa: E402
from mtrain.runner import build_runner  # noqa: E402
from toy_detector import ToyDetDataset, ToyDetector  # noqa: E402

VAL_SIZE = 51  # odd: the second rank's share is padded by one sample


def _cfg(max_epochs=4, samples_per_gpu=8, **evaluation):
    return Config(dict(
        model=dict(type='ToyDetector'), device='cpu',
        optimizer=dict(type='Adam', lr=0.05), optimizer_config=dict(),
        data=dict(samples_per_gpu=samples_per_gpu, workers_per_gpu=0, persistent_workers=False,
                  train=dict(type='ToyDetDataset', n=96, seed=1),
                  val=dict(type='ToyDetDataset', n=VAL_SIZE, test_mode=True)),
        runner=dict(type='EpochBasedRunner', max_epochs=max_epochs),
        evaluation=dict(interval=1, metric='mAP', save_best='mAP', **evaluation),
        checkpoint_config=dict(interval=max_epochs),
        log_config=dict(interval=2, hooks=[dict(type='TextLoggerHook')])))


def _train(cfg, work_dir, logger, distributed=False):
    runner, loaders, workflow = build_runner(cfg, work_dir, logger, seed=0,
                                             distributed=distributed)
    runner.run(loaders, workflow)
    return runner


def _val_lines(work_dir):
    [name] = [n for n in os.listdir(work_dir) if n.endswith('.log.json')]
    with open(osp.join(work_dir, name)) as f:
        return [line for line in map(json.loads, f) if line.get('mode') == 'val']


def _trained_detector(path):
    model = ToyDetector()
    state = torch.load(path, map_location='cpu', weights_only=True)['state_dict']
    model.load_state_dict(state)
    return model


def test_the_rule_and_the_forward_arguments():
    class MMClsStyle(nn.Module):  # mmcls 0.x: no `rescale` anywhere in its signatures
        def forward(self, img, return_loss=True, **kwargs):
            return []

        def simple_test(self, img, img_metas=None, **kwargs):
            return []

    assert uses_mmcv_contract(ToyDetector()) and uses_mmcv_contract(MMClsStyle())
    assert not uses_mmcv_contract(nn.Linear(2, 2))
    assert eval_forward_kwargs(ToyDetector()) == {'return_loss': False, 'rescale': True}
    assert eval_forward_kwargs(MMClsStyle()) == {'return_loss': False}


def test_one_process_trains_evaluates_and_keeps_the_best_map(tmp_path, logger):
    runner = _train(_cfg(gpu_collect=True, tmpdir='ignored'), str(tmp_path), logger)
    [hook] = [h for h in runner.hooks if isinstance(h, EvalHook)]
    assert type(hook) is EvalHook  # one process: DistEvalHook's keys were dropped
    maps = [line['mAP'] for line in _val_lines(tmp_path)]
    assert len(maps) == 4 and maps[-1] > 0.6 and maps[-1] > maps[0]
    msgs = runner.meta['hook_msgs']
    assert msgs['best_score'] == pytest.approx(max(maps), abs=1e-5)
    assert osp.basename(msgs['best_ckpt']) == f'best_mAP_epoch_{int(np.argmax(maps)) + 1}.pth'
    assert [n for n in os.listdir(tmp_path) if n.startswith('best_')] == [
        osp.basename(msgs['best_ckpt'])]

    model = _trained_detector(tmp_path / 'epoch_4.pth')
    loader = build_dataloader(ToyDetDataset(VAL_SIZE, test_mode=True), 8, 0, shuffle=False)
    results = single_gpu_test(model, loader)
    assert len(results) == VAL_SIZE and all(len(r) == 3 and r[0].shape == (1, 5) for r in results)
    assert ToyDetDataset(VAL_SIZE).evaluate(results)['mAP'] == pytest.approx(maps[-1], abs=1e-5)
    # rescale=True is what makes the boxes match: at the input scale they would not
    unscaled = [model(**b, return_loss=False) for b in loader]
    assert ToyDetDataset(VAL_SIZE).evaluate(sum(unscaled, []))['mAP'] < 0.2


def _two_rank_job(rank, work_dir, out_dir, logger):
    runner = _train(_cfg(samples_per_gpu=4), work_dir, logger, distributed=True)  # batch 8
    [hook] = [h for h in runner.hooks if isinstance(h, EvalHook)]
    loader = hook.dataloader
    by_gpu = multi_gpu_test(runner.model, loader, gpu_collect=True)
    by_files = multi_gpu_test(runner.model, loader, tmpdir=osp.join(out_dir, 'parts'))
    assert (by_gpu is None) == (by_files is None) == (rank != 0)
    torch.save({'hook': type(hook).__name__, 'metrics': runner.eval_results,
                'hook_msgs': runner.meta['hook_msgs'],
                'by_gpu': by_gpu, 'by_files': by_files, 'shard': len(loader.sampler)},
               osp.join(out_dir, f'rank{rank}.pt'))


@pytest.mark.slow
def test_two_processes_gather_in_dataset_order_and_score_as_one(tmp_path, logger):
    work_dir, out_dir = tmp_path / 'work', tmp_path / 'out'
    out_dir.mkdir()
    codes, _ = launch(_two_rank_job, str(work_dir), str(out_dir), logger, timeout=300)
    assert codes == [0, 0]
    ranks = [torch.load(out_dir / f'rank{r}.pt', weights_only=False) for r in range(2)]
    assert [r['hook'] for r in ranks] == ['DistEvalHook'] * 2
    assert [r['shard'] for r in ranks] == [26, 26]  # 51 samples, one padded
    assert ranks[0]['metrics'] == ranks[1]['metrics']  # every rank got rank 0's metrics
    assert not osp.exists(work_dir / '.eval_hook')  # the tmpdir parts were cleaned up
    assert not osp.exists(out_dir / 'parts')

    # The final weights scored in one process: the same per-image results, in order.
    model = _trained_detector(work_dir / 'epoch_4.pth')
    loader = build_dataloader(ToyDetDataset(VAL_SIZE, test_mode=True), 8, 0, shuffle=False)
    expected = single_gpu_test(model, loader)
    for gathered in (ranks[0]['by_gpu'], ranks[0]['by_files']):
        assert len(gathered) == VAL_SIZE
        for got, want in zip(gathered, expected):
            for a, b in zip(got, want):
                np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)
    one_process = ToyDetDataset(VAL_SIZE).evaluate(expected)['mAP']
    assert ranks[0]['metrics']['mAP'] == pytest.approx(one_process, abs=1e-6)
    assert _val_lines(work_dir)[-1]['mAP'] == pytest.approx(one_process, abs=1e-5)
    assert one_process > 0.6
    best = ranks[0]['hook_msgs']['best_ckpt']
    assert osp.isfile(best) and [n for n in os.listdir(work_dir) if n.startswith('best_')] == [
        osp.basename(best)]


def test_dist_eval_hook_options_are_mmcvs():
    loader = build_dataloader(ToyDetDataset(8), 4, 0, shuffle=False)
    hook = DistEvalHook(loader, metric='mAP')
    assert (hook.gpu_collect, hook.tmpdir, hook.broadcast_bn_buffer) == (False, None, True)
    assert EvalHook(loader).gpu_collect is True  # plain EvalHook in a distributed run
