"""A second resume within one epoch after a change of batch size (issue 22 item 4).

docs/robustness.md: resumed on another geometry, "over the rest of the epoch every sample
is seen once, none twice" — also when the resumed run is itself resumed mid-epoch.
"""

import pytest
import torch

from mtrain.datasets import build_dataloader
from mtrain.hooks import Hook, OptimizerHook


class _Seen(Hook):
    """Notes the first feature (which identifies the sample) of each batch's samples."""

    def __init__(self):
        self.seen = []

    def before_train_iter(self, runner):
        self.seen += runner.data_batch['img'][:, 0].tolist()


def _train(make_runner, dataset, by_epoch, batch, iters, resume=None):
    """``iters`` more iterations with ``batch`` samples each; a checkpoint after each."""
    runner = make_runner(by_epoch=by_epoch, max_len=4 if by_epoch else 100)
    runner.register_hook(OptimizerHook())
    runner.register_checkpoint_hook(dict(interval=1, by_epoch=False))
    seen = _Seen()
    runner.register_hook(seen)
    if resume is not None:
        runner.resume(resume)
    stop = runner.iter + iters

    class Stop(Hook):
        def after_train_iter(self, r):
            r.should_stop = r.iter + 1 >= stop

    runner.register_hook(Stop(), 'LOWEST')
    runner.run([build_dataloader(dataset, batch, 0, shuffle=True, seed=3)], [('train', 1)])
    return runner.iter, seen.seen


@pytest.mark.parametrize('by_epoch', [True, False], ids=['EpochBasedRunner', 'IterBasedRunner'])
def test_second_resume_after_a_batch_size_change_sees_no_sample_twice(make_runner, toy_dataset,
                                                                      tmp_path, by_epoch):
    # 64 samples. 8 a batch for 1 iteration (8 seen), then resumed with 12 a batch for 2
    # (24 more: at sample 32, not at a multiple of 12), then resumed again with 12 a batch
    # until the epoch ends (32 more: 12 + 12 + 8).
    it, first = _train(make_runner, toy_dataset, by_epoch, 8, 1)
    it, second = _train(make_runner, toy_dataset, by_epoch, 12, 2,
                        resume=str(tmp_path / f'iter_{it}.pth'))
    _, third = _train(make_runner, toy_dataset, by_epoch, 12, 3,
                      resume=str(tmp_path / f'iter_{it}.pth'))
    epoch = first + second + third
    assert len(first) == 8 and len(second) == 24 and len(third) == 32
    assert sorted(epoch) == sorted(toy_dataset.x[:, 0].tolist())  # each sample once


def test_the_checkpoint_holds_the_exact_sample_position(make_runner, toy_dataset, tmp_path):
    it, _ = _train(make_runner, toy_dataset, True, 8, 1)
    it, _ = _train(make_runner, toy_dataset, True, 12, 2, resume=str(tmp_path / f'iter_{it}.pth'))
    ckpt = torch.load(tmp_path / f'iter_{it}.pth', weights_only=True)
    assert ckpt['data']['samples'] == 8 + 2 * 12 and ckpt['data']['epoch'] == 0
