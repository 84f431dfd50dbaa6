"""mmcv 1.x's checkpoint functions, with mtrain's safe (weights_only) loading.

As mmcv: ``save_checkpoint`` writes ``{'meta', 'state_dict', 'optimizer'}``
with wrappers left out of the keys; a non-strict load takes every tensor
that fits and reports missing / unexpected / shape-mismatched keys once;
``revise_keys`` rewrite names; ``prefix`` picks one submodule's weights.
"""

import logging
import os

import pytest
import torch
from torch import nn

from mtrain.parallel import ModelWrapper
from mtrain.runner import CheckpointError
from mtrain.runner.checkpoint import (finish_sharded, get_state_dict, load_checkpoint,
                                      load_checkpoint_with_prefix, load_state_dict,
                                      model_state, save_checkpoint, weights_to_cpu)


class Net(nn.Module):
    def __init__(self, num_classes: int = 3) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8))
        self.head = nn.Linear(8, num_classes)
        self.CLASSES = ('a', 'b', 'c')[:num_classes]

    def forward(self, x):
        return self.head(self.backbone(x))


def test_save_then_load_round_trip_with_optimizers_and_wrappers(tmp_path):
    model = Net()
    optimizers = {'all': torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)}
    model(torch.randn(4, 4)).sum().backward()
    optimizers['all'].step()
    path = str(tmp_path / 'm.pth')
    save_checkpoint(ModelWrapper(model), path, optimizer=optimizers, meta=dict(epoch=3))
    ckpt = torch.load(path, weights_only=True)
    assert ckpt['meta']['epoch'] == 3 and tuple(ckpt['meta']['CLASSES']) == ('a', 'b', 'c')
    assert 'time' in ckpt['meta'] and set(ckpt['optimizer']) == {'all'}
    assert list(ckpt['state_dict']) == list(model.state_dict())  # no 'module.' prefix
    fresh = Net()
    loaded = load_checkpoint(fresh, path, map_location='cpu', strict=True)
    assert loaded['meta']['epoch'] == 3
    for k, v in model.state_dict().items():
        assert torch.equal(fresh.state_dict()[k], v)
    with pytest.raises(TypeError, match='meta must be a dict or None'):
        save_checkpoint(model, path, meta=[1])


def test_get_state_dict_drops_nested_wrappers_and_weights_to_cpu_keeps_metadata():
    outer = nn.Sequential(ModelWrapper(Net()))
    keys = list(get_state_dict(outer))
    assert keys[0] == '0.backbone.0.weight' and not any('module' in k for k in keys)
    cpu = weights_to_cpu(get_state_dict(outer))
    assert cpu._metadata['0.backbone.1']['version'] == nn.BatchNorm1d._version


def test_fine_tuning_load_takes_what_fits_and_reports_the_rest(tmp_path, caplog):
    source = Net(num_classes=3)
    path = str(tmp_path / 'src.pth')
    state = dict(source.state_dict(), extra=torch.zeros(1))
    del state['backbone.1.running_var'], state['backbone.1.num_batches_tracked']
    torch.save({'state_dict': {f'module.{k}': v for k, v in state.items()}}, path)
    target = Net(num_classes=2)
    logger = logging.getLogger('mtrain.test.ckpt')
    with caplog.at_level(logging.WARNING, logger='mtrain.test.ckpt'):
        load_checkpoint(target, path, logger=logger)  # module. stripped by default
    assert torch.equal(target.backbone[0].weight, source.backbone[0].weight)
    assert not torch.equal(target.head.bias[:2], source.head.bias[:2])  # not loaded
    message = caplog.records[-1].getMessage()
    assert message.startswith('The model and loaded state dict do not match exactly')
    assert 'head.weight: checkpoint (3, 8), model (2, 8)' in message
    assert 'unexpected key in source state_dict: extra' in message
    # num_batches_tracked is never reported missing (as mmcv)
    assert message.endswith('missing keys in source state_dict: backbone.1.running_var')
    with pytest.raises(RuntimeError, match='head.bias: checkpoint \\(3,\\), model \\(2,\\)'):
        load_state_dict(Net(num_classes=2), source.state_dict(), strict=True)


def test_revise_keys_and_prefix(tmp_path):
    source = Net()
    path = str(tmp_path / 'det.pth')
    torch.save({'state_dict': source.state_dict()}, path)
    backbone = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8))
    weights = load_checkpoint_with_prefix('backbone', path)
    backbone.load_state_dict(weights)
    assert torch.equal(backbone[0].weight, source.backbone[0].weight)
    other = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8))
    load_checkpoint(other, path, revise_keys=[(r'^backbone\.', '')])  # head.*: unexpected
    assert torch.equal(other[1].running_mean, source.backbone[1].running_mean)
    with pytest.raises(CheckpointError, match="no weights under the prefix 'neck.'"):
        load_checkpoint_with_prefix('neck.', path)


def test_loading_stays_safe(tmp_path):
    path = tmp_path / 'evil.pth'
    torch.save({'state_dict': {}, 'obj': CheckpointError('a pickled object')}, path)
    with pytest.raises(CheckpointError, match='refused: loading it could run code'):
        load_checkpoint(Net(), str(path))


@pytest.mark.parametrize('url', ['s3://bucket/work/epoch_1.pth', 'http://host/x.pth'])
def test_a_url_is_refused_in_one_line_and_nothing_is_written(url, tmp_path, monkeypatch):
    """mtrain writes local files only: a URL is not a folder named ``s3:``."""
    from mtrain.hooks import CheckpointHook
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"^the checkpoint file '.*' is a URL: mtrain writes "
                                         r'checkpoints to local files only\.'):
        save_checkpoint(Net(), url)
    out_dir = url.rpartition('/')[0]
    with pytest.raises(ValueError, match=r'checkpoint_config.out_dir.*is a URL'):
        CheckpointHook(interval=1, out_dir=out_dir)
    assert list(tmp_path.iterdir()) == []


def test_a_sharded_checkpoint_saved_again_under_its_name_is_replaced_whole(tmp_path):
    path = str(tmp_path / 'iter_4.pth')
    for version in (1, 2):  # the preemption save can rewrite the hook's of the same iteration
        stage = tmp_path / f'.sharded-tmp-{version}'
        stage.mkdir()
        (stage / f'shards_{version}').write_text('x')
        finish_sharded(str(stage), {'version': version}, path)
        assert not stage.exists()
    assert sorted(os.listdir(path)) == ['mtrain_state.pth', 'shards_2']
    assert torch.load(os.path.join(path, 'mtrain_state.pth')) == {'version': 2}
    assert sorted(os.listdir(tmp_path)) == ['iter_4.pth']  # nothing old left beside it

class GAN(nn.Module):
    """mmgen's layout: the generator and the discriminator, each in its own wrapper (DDP there)."""

    def __init__(self, wrap: bool = True) -> None:
        super().__init__()
        self.generator = nn.Sequential(nn.Linear(2, 4), nn.BatchNorm1d(4))
        self.discriminator = nn.Linear(4, 1)
        if wrap:
            self.generator = ModelWrapper(self.generator)
            self.discriminator = ModelWrapper(self.discriminator)


def test_load_puts_wrapper_free_names_back_under_inner_wrappers(tmp_path, caplog):
    """As mmcv 1.7.2's ``load_state_dict``, which unwraps a wrapper at every depth: mmgen's
    own resume loads ``generator.0.weight`` (saved by ``get_state_dict``) into a model whose
    ``generator`` is a DDP, non-strictly, and must not leave its weights as they were."""
    trained = GAN()
    trained.generator(torch.randn(8, 2))  # running stats move off their initial values
    path = str(tmp_path / 'gan.pth')
    save_checkpoint(ModelWrapper(trained), path)
    assert 'generator.0.weight' in torch.load(path, weights_only=True)['state_dict']

    fresh = GAN()
    with caplog.at_level(logging.WARNING):
        load_checkpoint(ModelWrapper(fresh), path, logger=logging.getLogger('gan'))
    assert caplog.records == []  # nothing missing, nothing unexpected
    expected = get_state_dict(trained)
    for name, value in get_state_dict(fresh).items():
        assert torch.equal(value, expected[name]), name
    # A file written with the wrappers' names (module.state_dict()) still loads, strictly.
    other = GAN()
    load_state_dict(other, trained.state_dict(), strict=True)
    assert torch.equal(other.discriminator.module.weight, trained.discriminator.module.weight)
    # The plain model takes the same file (nothing to rename).
    plain = GAN(wrap=False)
    load_checkpoint(plain, path, strict=True)
    assert torch.equal(plain.generator[1].running_mean, trained.generator.module[1].running_mean)


def test_runner_checkpoints_name_weights_without_inner_wrappers():
    """What a runner saves (``model_state``) is what mmcv 1.7.2's runners save
    (``get_state_dict``): an mmedit/mmgen-style model with its generator in a DDP
    writes ``generator.0.weight``, which the plain model (a test script) loads."""
    gan = GAN()
    gan.generator(torch.randn(8, 2))
    state = model_state(ModelWrapper(gan))
    expected = get_state_dict(gan)
    assert list(state) == list(expected)
    assert all(torch.equal(state[k], expected[k]) for k in state)
    assert state._metadata['generator.1'] == expected._metadata['generator.1']
    plain = GAN(wrap=False)
    load_state_dict(plain, state, strict=True)
    assert torch.equal(plain.generator[1].running_mean, gan.generator.module[1].running_mean)
