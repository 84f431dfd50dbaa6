"""A dict of optimizers (GAN-style): the model's ``train_step`` steps each itself.

As in mmcv 1.x: ``optimizer_config=None`` (no OptimizerHook), the runner hands
``train_step`` the dict, ``current_lr()`` / ``current_momentum()`` return
``{name: [per group]}``, a checkpoint holds ``optimizer: {name: state}`` and a
resume restores each by name. The optimizers are built per submodule of the
same name (mmgen's ``build_optimizers``).
"""

import json
import logging

import pytest
import torch
from mmengine.config import Config
from torch import nn
from torch.utils.data import Dataset

from mtrain.optim import build_optimizer
from mtrain.runner import CheckpointError, build_runner
from mtrain.utils import ConfigError


class GaussianPoints(Dataset):
    """256 points of N((2, -1), 0.5²): what the generator must learn to produce."""

    def __init__(self, n: int = 256) -> None:
        g = torch.Generator().manual_seed(1)
        self.points = torch.randn(n, 2, generator=g) * 0.5 + torch.tensor([2.0, -1.0])

    def __len__(self) -> int:
        return len(self.points)

    def __getitem__(self, i):
        return {'real': self.points[i]}


class ToyGAN(nn.Module):
    """A 2-D GAN; ``train_step`` does a discriminator step then a generator step.

    Its ``log_vars`` stay tensors (no host sync); mmgen's are floats: both log.
    """

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.generator = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
        self.discriminator = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 1))

    def train_step(self, data_batch, optimizer, **kwargs):
        real = data_batch['real']
        bce = nn.functional.binary_cross_entropy_with_logits
        fake = self.generator(torch.randn(len(real), 4))
        optimizer['discriminator'].zero_grad()
        d_real, d_fake = self.discriminator(real), self.discriminator(fake.detach())
        loss_d = bce(d_real, torch.ones_like(d_real)) + bce(d_fake, torch.zeros_like(d_fake))
        loss_d.backward()
        optimizer['discriminator'].step()
        optimizer['generator'].zero_grad()
        d_fake = self.discriminator(fake)
        loss_g = bce(d_fake, torch.ones_like(d_fake))
        loss_g.backward()
        optimizer['generator'].step()
        return dict(log_vars=dict(loss_d=loss_d.detach(), loss_g=loss_g.detach()),
                    num_samples=len(real))


def _cfg(drop=(), **overrides) -> Config:
    cfg = dict(
        model=dict(type=ToyGAN),
        optimizer=dict(generator=dict(type='Adam', lr=1e-3, betas=(0.5, 0.999)),
                       discriminator=dict(type='SGD', lr=4e-3, momentum=0.8)),
        optimizer_config=None,  # the model steps both optimizers itself
        runner=dict(type='IterBasedRunner', max_iters=24),
        data=dict(samples_per_gpu=32, workers_per_gpu=0, train=dict(type=GaussianPoints)),
        checkpoint_config=dict(interval=12, by_epoch=False),
        log_config=dict(interval=6, hooks=[dict(type='TextLoggerHook', by_epoch=False)]),
        device='cpu')
    cfg.update(overrides)
    return Config({k: v for k, v in cfg.items() if k not in drop})


def _run(cfg, work_dir, seed=0):
    logger = logging.getLogger('mtrain.test.gan')
    runner, loaders, workflow = build_runner(cfg, str(work_dir), logger, seed=seed)
    runner.run(loaders, workflow)
    return runner


def test_gan_trains_checkpoints_and_resumes_to_the_same_weights(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger='mtrain.test.gan'):
        full = _run(_cfg(), tmp_path / 'full')
    assert set(full.optimizer) == {'generator', 'discriminator'}
    assert full.current_lr() == {'generator': [1e-3], 'discriminator': [4e-3]}
    assert full.current_momentum() == {'generator': [0.5], 'discriminator': [0.8]}
    # Both optimizers stepped their submodule
    start, trained = ToyGAN().state_dict(), full.model_wrapper.module.state_dict()
    assert all(not torch.equal(start[k], trained[k]) for k in start)
    ckpt = torch.load(tmp_path / 'full' / 'iter_12.pth', weights_only=True)
    assert set(ckpt['optimizer']) == {'generator', 'discriminator'}
    assert ckpt['optimizer']['generator']['state'][0]['step'] == 12  # Adam stepped each iter
    # Logging: lr per optimizer, in the text log and the json log (mmcv's format)
    assert 'lr_generator: 1.000e-03 lr_discriminator: 4.000e-03' in caplog.text
    lines = [json.loads(l) for l in open(tmp_path / 'full' / f'{full.timestamp}.log.json')]
    train = [l for l in lines if l.get('mode') == 'train']
    assert train[0]['lr'] == {'generator': 1e-3, 'discriminator': 4e-3}
    assert len(train) == 4 and {'loss_d', 'loss_g'} <= set(train[0])
    assert train[-1]['loss_d'] < train[0]['loss_d']  # the discriminator learns
    # Resume from iteration 12: the optimizers' states come back by name
    resumed = _run(_cfg(resume_from=str(tmp_path / 'full' / 'iter_12.pth')), tmp_path / 'res')
    assert resumed.iter == 24
    for name, value in full.model_wrapper.module.state_dict().items():
        torch.testing.assert_close(resumed.model_wrapper.module.state_dict()[name], value,
                                   rtol=0, atol=1e-6)


def test_an_optimizer_hook_with_a_dict_of_optimizers_is_a_config_error(tmp_path):
    cfg = _cfg(drop=['optimizer_config'])  # the default would build an OptimizerHook
    with pytest.raises(ConfigError, match='optimizer_config.*set optimizer_config=None'):
        build_runner(cfg, str(tmp_path), logging.getLogger('mtrain.test.gan'))


def test_a_name_that_is_no_submodule_says_which_are(tmp_path):
    with pytest.raises(ConfigError, match="optimizer.generatr.*no submodule 'generatr'. "
                                          "Did you mean 'generator'"):
        build_optimizer(ToyGAN(), dict(generatr=dict(type='Adam', lr=1e-3)))


def test_resume_without_one_optimizer_state_names_it(tmp_path):
    _run(_cfg(runner=dict(type='IterBasedRunner', max_iters=12)), tmp_path)
    path = tmp_path / 'iter_12.pth'
    ckpt = torch.load(path, weights_only=True)
    del ckpt['optimizer']['discriminator']
    torch.save(ckpt, path)
    with pytest.raises(CheckpointError, match=r"no optimizer state for \['discriminator'\]"):
        build_runner(_cfg(resume_from=str(path)), str(tmp_path / 'r'),
                     logging.getLogger('mtrain.test.gan'))
