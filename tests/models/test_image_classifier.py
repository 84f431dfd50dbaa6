"""ImageClassifier: torchvision or registered backbones, losses, local pretrained weights."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mtrain.datasets import build_dataloader
from mtrain.registry import BATCH_PROCESSORS, DATASETS, HOOKS, MODELS, build
from mtrain.utils import ConfigError


def classifier(**kwargs) -> nn.Module:
    cfg = dict(type='ImageClassifier', backbone=dict(type='torchvision.resnet18'),
               head=dict(type='LinearClsHead', num_classes=3))
    cfg.update(kwargs)
    torch.manual_seed(0)
    return build(cfg, MODELS, 'model')


def test_train_mode_returns_the_loss_and_eval_mode_the_scores():
    model = classifier(label_smoothing=0.2)
    assert isinstance(model.backbone.fc, nn.Identity) and model.head.fc.in_features == 512
    img, label = torch.randn(4, 3, 32, 32), torch.tensor([0, 1, 2, 1])
    model.eval()
    scores = model(img)
    assert scores.shape == (4, 3) and torch.allclose(scores.sum(1), torch.ones(4))
    logits = model.head(model.backbone(img))
    model.train()
    model.backbone.apply(lambda m: m.eval() if isinstance(m, nn.BatchNorm2d) else None)
    loss = model(img, label)['loss']
    assert loss.item() == pytest.approx(
        F.cross_entropy(logits, label, label_smoothing=0.2).item(), rel=1e-5)
    assert loss.item() != pytest.approx(F.cross_entropy(logits, label).item(), rel=1e-3)


def test_a_sequential_classifier_loses_only_its_last_linear_layer():
    model = build(dict(type='ImageClassifier', backbone=dict(type='torchvision.mobilenet_v3_small'),
                       head=dict(num_classes=5)), MODELS, 'model')
    assert isinstance(model.backbone.classifier[-1], nn.Identity)
    assert isinstance(model.backbone.classifier[0], nn.Linear)  # the hidden layer stays
    assert model.head.fc.in_features == 1024
    assert model.eval()(torch.randn(1, 3, 32, 32)).shape == (1, 5)


def test_any_registered_module_as_backbone_with_feature_maps():
    conv = dict(type=nn.Conv2d, in_channels=3, out_channels=6, kernel_size=3)
    model = build(dict(type='ImageClassifier', backbone=conv,
                       head=dict(num_classes=2, in_channels=6)), MODELS, 'model')
    assert model.eval()(torch.randn(2, 3, 8, 8)).shape == (2, 2)  # maps pooled by the head
    with pytest.raises(ConfigError) as err:
        build(dict(type='ImageClassifier', backbone=conv, head=dict(num_classes=2)), MODELS,
              'model')
    assert err.value.key == 'model.head' and 'head.in_channels' in str(err.value)


def test_pretrained_backbone_weights_load_with_a_report(tmp_path):
    source = classifier().backbone
    torch.manual_seed(1)
    torchvision_style = {k: v + 1 for k, v in source.state_dict().items()
                         if v.is_floating_point()}
    torchvision_style.update({'fc.weight': torch.zeros(1000, 512), 'fc.bias': torch.zeros(1000)})
    torch.save(torchvision_style, tmp_path / 'resnet18.pth')
    model = classifier(pretrained=str(tmp_path / 'resnet18.pth'))
    assert torch.equal(model.backbone.conv1.weight, torchvision_style['conv1.weight'])
    assert sorted(model.pretrained_report['unexpected']) == ['fc.bias', 'fc.weight']
    assert all('num_batches_tracked' in k for k in model.pretrained_report['missing'])


def test_a_whole_classifier_checkpoint_with_another_head_size(tmp_path):
    other = build(dict(type='ImageClassifier', backbone=dict(type='torchvision.resnet18'),
                       head=dict(num_classes=10)), MODELS, 'model')
    torch.save({'meta': {}, 'state_dict': other.state_dict()}, tmp_path / 'epoch_1.pth')
    model = classifier(pretrained=str(tmp_path / 'epoch_1.pth'))
    assert torch.equal(model.backbone.layer4[1].conv2.weight, other.backbone.layer4[1].conv2.weight)
    assert model.pretrained_report['mismatched'] == ['head.fc.weight', 'head.fc.bias']


def test_unsafe_or_missing_weights_are_config_errors(tmp_path):
    torch.save({'state_dict': {'w': torch.ones(1)}, 'fn': nn.ReLU()}, tmp_path / 'pickled.pth')
    for path, words in ((tmp_path / 'pickled.pth', 'holds more than tensors'),
                        (tmp_path / 'absent.pth', 'does not exist')):
        with pytest.raises(ConfigError) as err:
            classifier(pretrained=str(path))
        assert err.value.key == 'model.pretrained' and words in str(err.value)


def test_channels_last_and_bfloat16_mixed_precision_from_config(make_runner):
    dataset = build(dict(type='FakeData', size=8, image_size=(3, 16, 16), num_classes=3),
                    DATASETS, 'data.train')
    loader = build_dataloader(dataset, samples_per_gpu=4, workers_per_gpu=0, seed=0)
    processor = build(dict(type='BasicBatchProcessor', channels_last=True), BATCH_PROCESSORS,
                      'batch_processor')
    runner = make_runner(model=classifier(), max_len=2, lr=0.01, batch_processor=processor)
    # what fp16 = dict(dtype='bfloat16') makes of optimizer_config (see docs/mixed_precision.md)
    runner.register_hook(build(dict(type='Fp16OptimizerHook', dtype='bfloat16', loss_scale=None),
                               HOOKS, 'optimizer_config'))
    model = runner.model_wrapper.module
    dtypes = []
    model.backbone.layer1.register_forward_hook(lambda m, i, out: dtypes.append(out.dtype))
    weight = model.backbone.conv1.weight
    runner.run([loader], [('train', 1)])
    assert processor.autocast_dtype == torch.bfloat16 and set(dtypes) == {torch.bfloat16}
    assert weight.dtype == torch.float32  # autocast: the weights stay fp32
    assert weight.is_contiguous(memory_format=torch.channels_last)
    assert torch.isfinite(runner.outputs['loss']) and runner.num_updates == 4
    # the optimizer still holds the same tensors: the model was converted in place
    assert runner.optimizer.param_groups[0]['params'][0] is weight
