"""EvalHook's distributed contract on 2 gloo ranks: mmcv 1.7.2's, so 1.x overrides never hang.

mmcv 1.x's ``DistEvalHook._do_evaluate`` (and mmseg 0.30's and mmcls 0.25's
copies of it) runs the collective inference on every rank, then calls
``evaluate`` and ``_save_ckpt`` on rank 0 alone. Those two must hold no
collective; what rank 0 decided (the metrics, the best checkpoint) must still
reach every rank. Each job has a deadline: a hang fails the test.
"""

import os
import os.path as osp
import sys

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import Dataset

from mtrain.datasets import build_dataloader
from mtrain.hooks import DistEvalHook, EarlyStoppingHook, Hook, OptimizerHook
from mtrain.parallel import MTDistributedDataParallel
from mtrain.runner import EpochBasedRunner
from mtrain.utils import get_logger

sys.path.insert(0, osp.join(osp.dirname(osp.abspath(__file__)), '..', 'parallel'))
from dist_launch import launch  # noqa: E402

pytestmark = pytest.mark.slow

DEADLINE = 60  # seconds: each job takes a few; a hung one is killed and fails the test
ACCURACY = [0.5, 0.7, 0.6, 0.6, 0.6]  # what the val set scores, evaluation after evaluation


class _Points(Dataset):
    """16 samples of 4 features; ``evaluate`` gives the next of ``ACCURACY`` (rank 0 scores)."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(16, 4, generator=g)
        self.y = (self.x[:, 0] > 0).long()
        self.calls = 0

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return {'img': self.x[i], 'gt_label': self.y[i]}

    def evaluate(self, results, logger=None, **kwargs):
        assert len(results) == len(self), 'every sample scored once'
        self.calls += 1
        return {'accuracy': ACCURACY[self.calls - 1], 'samples': float(len(results))}


class _Classifier(nn.Module):
    """An mmcv 1.x model: ``forward(..., return_loss)`` and its own ``train_step``."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 2)

    def forward(self, img, gt_label=None, return_loss=True):
        logits = self.fc(img)
        if return_loss:
            return {'loss': nn.functional.cross_entropy(logits, gt_label)}
        return list(np.asarray(logits.softmax(1).detach()))

    def train_step(self, data, optimizer=None, **kwargs):
        loss = self(**data)['loss']
        return dict(loss=loss, log_vars={'loss': loss.item()}, num_samples=len(data['img']))


class Mmcv1xDistEvalHook(DistEvalHook):
    """``_do_evaluate`` as mmcv 1.7.2's ``DistEvalHook`` wrote it (mmseg/mmcls copy it)."""

    def _do_evaluate(self, runner):
        tmpdir = self.tmpdir or osp.join(runner.work_dir, '.eval_hook')
        results = self.test_fn(runner.model, self.dataloader, tmpdir=tmpdir,
                               gpu_collect=self.gpu_collect)
        if runner.rank == 0:
            runner.log_buffer.output['eval_iter_num'] = len(self.dataloader)
            key_score = self.evaluate(runner, results)
            if self.save_best and key_score:
                self._save_ckpt(runner, key_score)


class _Seen(Hook):
    """What this rank knows after each epoch's evaluation."""

    priority = 'LOWEST'

    def __init__(self, eval_hook):
        self.eval_hook, self.at = eval_hook, []

    def after_train_epoch(self, runner):
        msgs = runner.meta.get('hook_msgs', {})
        self.at.append(dict(results=dict(runner.eval_results), best=self.eval_hook.best_score,
                            path=self.eval_hook.best_ckpt_path, msgs_best=msgs.get('best_ckpt')))


def _job(rank, work_dir, hook_cls, early_stop):
    model = MTDistributedDataParallel(_Classifier())
    runner = EpochBasedRunner(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                              work_dir=work_dir, logger=get_logger(), max_epochs=len(ACCURACY))
    eval_hook = hook_cls(build_dataloader(_Points(), 4, 0, shuffle=False), save_best='accuracy')
    seen = _Seen(eval_hook)
    runner.register_hook(OptimizerHook())
    runner.register_hook(eval_hook, 'LOW')
    runner.register_hook(seen)
    if early_stop:
        runner.register_hook(EarlyStoppingHook(monitor='accuracy', patience=2))
    runner.run([build_dataloader(_Points(), 4, 0, shuffle=True, seed=0)], [('train', 1)])
    torch.save({'seen': seen.at, 'epoch': runner.epoch}, osp.join(work_dir, f'rank{rank}.pt'))


def _ranks(work_dir):
    return [torch.load(osp.join(work_dir, f'rank{r}.pt'), weights_only=False) for r in (0, 1)]


def test_a_1x_do_evaluate_scoring_on_rank_0_alone_neither_hangs_nor_leaves_rank_1_behind(
        tmp_path):
    codes, _ = launch(_job, str(tmp_path), Mmcv1xDistEvalHook, False, timeout=DEADLINE)
    assert codes == [0, 0]  # on a broadcast inside evaluate(): both hang until killed (-9)
    rank0, rank1 = _ranks(tmp_path)
    assert [s['results']['accuracy'] for s in rank0['seen']] == ACCURACY
    assert rank1['seen'] == rank0['seen']  # metrics, best score and file, hook_msgs
    best = str(tmp_path / 'best_accuracy_epoch_2.pth')
    assert rank1['seen'][-1]['path'] == rank1['seen'][-1]['msgs_best'] == best
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith('best_')) == [
        'best_accuracy_epoch_2.pth']
    written = torch.load(best, weights_only=False)['meta']['hook_msgs']
    assert written['best_score'] == 0.7


def test_every_rank_gets_the_metrics_so_early_stopping_stops_them_together(tmp_path):
    codes, _ = launch(_job, str(tmp_path), DistEvalHook, True, timeout=DEADLINE)
    assert codes == [0, 0]
    rank0, rank1 = _ranks(tmp_path)
    # best 0.7 at epoch 2, no better at 3 and 4: patience 2 ends the run after epoch 4 of 5
    assert rank0['epoch'] == rank1['epoch'] == 4
    assert rank1['seen'] == rank0['seen']
    assert [s['results']['samples'] for s in rank1['seen']] == [16.0] * 4
