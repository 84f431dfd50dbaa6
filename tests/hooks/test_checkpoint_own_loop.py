"""CheckpointHook under a 1.x-era runner subclass that brings its own loop and save_checkpoint.

1.x codebases that alternate several optimizers (GANs) ship such runners: their
own ``run``/``train`` (no ``super()``), ``call_hook`` as mmcv 1.7.2 wrote it, and
``save_checkpoint(out_dir, filename_tmpl, meta, save_optimizer, create_symlink)``.
mmcv writes the checkpoint inside ``CheckpointHook.after_train_iter``, through
that ``save_checkpoint``; so must mtrain.
"""

import os
import os.path as osp

import pytest
import torch
from torch import nn

from mtrain.datasets import build_dataloader
from mtrain.hooks import CheckpointHook, Hook
from mtrain.runner import IterBasedRunner, save_checkpoint

from conftest import ToyDataset


class ToyGAN(nn.Module):
    """A generator and a discriminator; ``train_step`` steps D every iteration, G every second."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.generator = nn.Linear(2, 4)
        self.discriminator = nn.Linear(4, 1)

    def train_step(self, data, optimizer, running_status=None):
        real = data['img']
        noise = torch.randn(real.shape[0], 2)
        bce = nn.functional.binary_cross_entropy_with_logits
        fake = self.generator(noise).detach()
        d_real, d_fake = self.discriminator(real), self.discriminator(fake)
        loss_d = bce(d_real, torch.ones_like(d_real)) + bce(d_fake, torch.zeros_like(d_fake))
        optimizer['discriminator'].zero_grad()
        loss_d.backward()
        optimizer['discriminator'].step()
        log_vars = {'loss_disc': loss_d.item()}
        if running_status['iteration'] % 2 == 1:
            d_gen = self.discriminator(self.generator(noise))
            loss_g = bce(d_gen, torch.ones_like(d_gen))
            optimizer['generator'].zero_grad()
            loss_g.backward()
            optimizer['generator'].step()
            log_vars['loss_gen'] = loss_g.item()
        return dict(log_vars=log_vars, num_samples=real.shape[0])


class AlternatingRunner(IterBasedRunner):
    """Written as that era's GAN runners: its own loop, hooks and checkpoint; no ``super()``."""

    def run(self, data_loaders, workflow, max_iters=None, **kwargs):
        if max_iters is not None:
            self._max_iters = max_iters
        self.call_hook('before_run')
        self.call_hook('before_epoch')
        batches = _Cycle(data_loaders[0])
        while self.iter < self._max_iters:
            self.train(batches, **kwargs)
        self.call_hook('after_epoch')
        self.call_hook('after_run')

    def train(self, data_loader, **kwargs):
        self.model.train()
        self.mode = 'train'
        self.data_loader = data_loader
        data_batch = next(data_loader)
        self.call_hook('before_train_iter')
        self.outputs = self.model.train_step(data_batch, self.optimizer,
                                             running_status=dict(iteration=self.iter))
        self.log_buffer.update(self.outputs['log_vars'], self.outputs['num_samples'])
        self.call_hook('after_train_iter')
        self._inner_iter += 1
        self._iter += 1

    def call_hook(self, fn_name):
        for hook in self._hooks:
            getattr(hook, fn_name)(self)

    def save_checkpoint(self, out_dir, filename_tmpl='iter_{}.pth', meta=None,
                        save_optimizer=True, create_symlink=True):
        meta = dict(meta or {}, iter=self.iter + 1, epoch=self.epoch + 1)
        filename = filename_tmpl.format(self.iter + 1)
        path = osp.join(out_dir, filename)
        save_checkpoint(self.model, path, optimizer=self.optimizer if save_optimizer else None,
                        meta=meta)
        if create_symlink:
            link = osp.join(out_dir, 'latest.pth')
            if osp.lexists(link):
                os.remove(link)
            os.symlink(filename, link)


class _Cycle:
    """The train loader, restarted at its end (what 1.x runners used mmcv's IterLoader for)."""

    def __init__(self, loader):
        self.loader, self.it = loader, iter(loader)

    def __next__(self):
        try:
            return next(self.it)
        except StopIteration:
            self.it = iter(self.loader)
            return next(self.it)


class _Weights(Hook):
    """The generator's weight after each iteration (they change no more within the stage)."""

    def __init__(self):
        self.at = {}

    def after_train_iter(self, runner):
        self.at[runner.iter + 1] = runner.model.generator.weight.detach().clone()


def _run(tmp_path, logger, **checkpoint):
    model = ToyGAN()
    optimizers = {'generator': torch.optim.Adam(model.generator.parameters(), lr=0.01),
                  'discriminator': torch.optim.Adam(model.discriminator.parameters(), lr=0.01)}
    runner = AlternatingRunner(model, optimizer=optimizers, work_dir=str(tmp_path),
                               logger=logger, max_iters=6)
    weights = _Weights()
    runner.register_hook(CheckpointHook(by_epoch=False, **checkpoint), 'NORMAL')
    runner.register_hook(weights, 'LOW')
    runner.run([build_dataloader(ToyDataset(n=16), 4, 0, shuffle=False)], [('train', 1)])
    return runner, weights.at


def test_a_runner_with_its_own_loop_gets_its_checkpoints_when_mmcv_writes_them(tmp_path, logger):
    runner, weights = _run(tmp_path, logger, interval=2, max_keep_ckpts=2)
    # iter_2.pth was written, then removed as the third file came (mmcv's max_keep_ckpts)
    assert sorted(os.listdir(tmp_path)) == ['iter_4.pth', 'iter_6.pth', 'latest.pth']
    assert os.readlink(tmp_path / 'latest.pth') == 'iter_6.pth'
    assert runner.meta['hook_msgs']['last_ckpt'] == str(tmp_path / 'iter_6.pth')
    for n in (4, 6):
        ckpt = torch.load(tmp_path / f'iter_{n}.pth', weights_only=False)
        assert ckpt['meta']['iter'] == n  # the runner's own save_checkpoint wrote it
        assert sorted(ckpt['optimizer']) == ['discriminator', 'generator']
        assert torch.equal(ckpt['state_dict']['generator.weight'], weights[n])
    # the generator stepped at iterations 2, 4, 6 only: Adam counted 3 steps by then
    last = torch.load(tmp_path / 'iter_6.pth', weights_only=False)['optimizer']
    assert last['generator']['state'][0]['step'] == 3
    assert last['discriminator']['state'][0]['step'] == 6


def test_filename_tmpl_is_passed_to_the_runners_save_checkpoint_as_mmcv_does(tmp_path, logger):
    runner, _ = _run(tmp_path, logger, interval=3, filename_tmpl='gan_{}.pth',
                     create_symlink=False)
    assert sorted(os.listdir(tmp_path)) == ['gan_3.pth', 'gan_6.pth']
    assert runner.meta['hook_msgs']['last_ckpt'] == str(tmp_path / 'gan_6.pth')


def test_async_save_under_such_a_runner_says_it_writes_in_the_foreground(tmp_path, logger,
                                                                         caplog):
    _run(tmp_path, logger, interval=6, async_save=True)
    assert 'async_save is ignored: AlternatingRunner.save_checkpoint' in caplog.text
    assert osp.isfile(tmp_path / 'iter_6.pth')


@pytest.mark.parametrize('by_epoch', [True, False])
def test_mtrains_own_loops_still_write_after_the_stages_later_hooks(make_runner, toy_loader,
                                                                    tmp_path, by_epoch):
    """The write waits for the stage's end under mtrain's loops (a LOW hook's change is in it)."""

    class _Count(Hook):
        def after_train_epoch(self, runner):
            runner.meta['epochs_seen'] = runner.meta.get('epochs_seen', 0) + 1

        def after_train_iter(self, runner):
            runner.meta['iters_seen'] = runner.meta.get('iters_seen', 0) + 1

    runner = make_runner(by_epoch=by_epoch, max_len=2)
    runner.register_hook(CheckpointHook(interval=1, by_epoch=by_epoch), 'NORMAL')
    runner.register_hook(_Count(), 'LOW')
    runner.run([toy_loader], [('train', 1)])
    name, key = ('epoch_2.pth', 'epochs_seen') if by_epoch else ('iter_2.pth', 'iters_seen')
    assert torch.load(tmp_path / name, weights_only=False)['meta'][key] == 2
