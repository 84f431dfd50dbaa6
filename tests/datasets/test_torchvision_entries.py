"""torchvision transforms, datasets and models built by name from config, lazily."""

import inspect
import logging
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torchvision
import torchvision.transforms.v2 as v2
from PIL import Image

from mtrain.datasets import (DATASET_NAMES, TRANSFORM_NAMES, ImageClassificationDataset,
                             build_pipeline)
from mtrain.registry import DATASETS, MODELS, build
from mtrain.utils import ConfigError

NORM = dict(mean=[0.5, 0.25, 0.125], std=[0.5, 0.25, 0.25])


def test_every_v2_transform_and_the_classification_datasets_are_registered():
    installed = {n for n, obj in vars(v2).items() if inspect.isclass(obj)
                 and issubclass(obj, v2.Transform) and obj is not v2.Transform}
    # Every installed transform can be named (update TRANSFORM_NAMES if torchvision grew);
    # the list may name a few that only newer torchvision releases have.
    assert installed <= set(TRANSFORM_NAMES)
    assert len(set(TRANSFORM_NAMES) - installed) <= 5
    assert set(DATASET_NAMES) <= set(torchvision.datasets.__all__)


def test_a_pipeline_from_config_runs_its_steps_in_order():
    pipeline = build_pipeline([
        dict(type='Resize', size=8, interpolation='nearest'),  # string → InterpolationMode
        dict(type='RandomApply', transforms=[dict(type='RandomHorizontalFlip', p=1.0)], p=1.0),
        dict(type='ToImage'),
        dict(type='ToDtype', dtype='float32', scale=True),  # string → torch.float32
        dict(type='Normalize', **NORM)])
    pixels = np.zeros((16, 16, 3), np.uint8)
    pixels[:, :8] = (255, 128, 0)  # left half coloured: the flip moves it right
    out = pipeline(Image.fromarray(pixels))
    assert out.shape == (3, 8, 8) and out.dtype == torch.float32
    assert pipeline.steps[0].interpolation == v2.InterpolationMode.NEAREST
    expected_right = [(1 - 0.5) / 0.5, (128 / 255 - 0.25) / 0.25, (0 - 0.125) / 0.25]
    assert out[:, :, 4:].mean(dim=(1, 2)).tolist() == pytest.approx(expected_right, abs=1e-5)
    assert out[:, :, :4].mean(dim=(1, 2)).tolist() == pytest.approx([-1, -1, -0.5], abs=1e-5)


@pytest.mark.parametrize('step,key,words', [
    (dict(type='RandomResizeCrop', size=8), 'pipeline.1.type', "'RandomResizedCrop'"),
    (dict(type='Resize', sise=8), 'pipeline.1.sise', "'size'"),
    (dict(type='ToDtype', dtype='float23'), 'pipeline.1.dtype', "'float32'"),
    (dict(type='Resize', size=8, interpolation='bilinearr'), 'pipeline.1.interpolation',
     "'bilinear'"),
    (dict(type='RandomApply', transforms=[dict(type='Flip')]), 'pipeline.1.transforms.0.type',
     'Flip'),
])
def test_a_bad_step_names_its_position_and_type(step, key, words):
    with pytest.raises(ConfigError) as err:
        build_pipeline([dict(type='ToImage'), step])
    assert err.value.key == key and 'pipeline step 1' in str(err.value)
    assert words in str(err.value)


def test_a_runtime_failure_names_the_step():
    pipeline = build_pipeline([dict(type='ToImage'), dict(type='Normalize', **NORM)])
    with pytest.raises(Exception) as err:  # Normalize of a uint8 image
        pipeline(Image.new('RGB', (4, 4)))
    assert 'pipeline.1 (Normalize)' in ''.join(getattr(err.value, '__notes__', []))


def test_fakedata_from_config_follows_the_model_contract(tmp_path):
    dataset = build(dict(type='FakeData', size=12, image_size=(3, 10, 10), num_classes=4,
                         pipeline=[dict(type='ToImage'),
                                   dict(type='ToDtype', dtype='float32', scale=True)]),
                    DATASETS, 'data.train')
    assert isinstance(dataset, ImageClassificationDataset) and len(dataset) == 12
    item = dataset[3]
    assert type(item['img']) is torch.Tensor and item['img'].shape == (3, 10, 10)
    assert 0 <= item['img'].min() and item['img'].max() <= 1
    assert item['gt_label'].dtype == torch.long
    labels = dataset.get_gt_labels()
    assert labels.tolist() == [int(dataset[i]['gt_label']) for i in range(12)]
    perfect = torch.nn.functional.one_hot(labels, 4).float()
    metrics = dataset.evaluate(perfect, ['accuracy', 'per_class'], out_dir=str(tmp_path),
                               tag='epoch_1')
    assert metrics['accuracy'] == 1.0 and metrics['precision'] == 1.0
    with Image.open(tmp_path / 'confusion_matrix_epoch_1.png') as png:
        assert png.format == 'PNG'


def test_a_torchvision_model_from_config():
    model = build(dict(type='torchvision.resnet18', num_classes=7), MODELS, 'model')
    assert isinstance(model, torchvision.models.ResNet) and model.fc.out_features == 7
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 7)


def test_bad_names_downloads_and_missing_folders_are_config_errors(tmp_path):
    cases = [
        (dict(type='torchvision.resnet181'), MODELS, 'model.type', "'torchvision.resnet18'"),
        (dict(type='ImageFolders', root=str(tmp_path)), DATASETS, 'data.train.type',
         "'ImageFolder'"),
        (dict(type='CIFAR10', root=str(tmp_path), download=True), DATASETS,
         'data.train.download', 'does not download'),
        (dict(type='ImageFolder', root=str(tmp_path / 'absent')), DATASETS, 'data.train.root',
         'does not exist'),
        (dict(type='ImageFolder', root=str(tmp_path)), DATASETS, 'data.train.root',
         'one sub-folder per class'),  # exists, but holds no class folders
        (dict(type='MNIST', root=str(tmp_path)), DATASETS, 'data.train.root',
         'place the files there'),  # exists, but holds no MNIST files
    ]
    for cfg, registry, key, words in cases:
        with pytest.raises(ConfigError) as err:
            build(cfg, registry, key.rsplit('.', 1)[0])
        assert err.value.key == key and words in str(err.value), str(err.value)
        assert 'download=True to download' not in str(err.value)


def test_weights_that_would_download_are_a_config_error(tmp_path, monkeypatch):
    monkeypatch.setenv('TORCH_HOME', str(tmp_path))  # an empty hub cache
    with pytest.raises(ConfigError) as err:
        build(dict(type='torchvision.resnet18', weights='IMAGENET1K_V1'), MODELS, 'model')
    assert err.value.key == 'model.weights' and 'resnet18-f37072fd.pth' in str(err.value)
    assert str(tmp_path) in str(err.value) and 'does not download' in str(err.value)


def test_torchvision_is_imported_only_when_a_config_builds_an_entry(tmp_path):
    """Importing mtrain, training the digits demo, looking names up: no torchvision (~2.5 s)."""
    script = (
        'import runpy, sys\n'
        'import mtrain, mtrain.datasets, mtrain.hooks, mtrain.models, mtrain.runner\n'
        'from mtrain.registry import DATASETS, TRANSFORMS, build, lookup\n'
        'from mtrain.utils import ConfigError\n'
        f'sys.argv = ["train.py", "configs/digits/lenet_digits.py", "--work-dir", r"{tmp_path}",\n'
        '            "--cfg-options", "runner.max_epochs=1"]\n'
        'try:\n'
        '    runpy.run_path("tools/train.py", run_name="__main__")\n'
        'except SystemExit as e:\n'
        '    assert e.code == 0, e.code\n'
        'lookup("ImageFolder", DATASETS, "data.train"); lookup("Resize", TRANSFORMS, "p")\n'
        'try:\n'
        '    build(dict(type="ImageFoldr"), DATASETS, "data.train")\n'
        'except ConfigError as e:\n'
        '    assert "ImageFolder" in str(e)\n'
        'print("torchvision" in sys.modules, "matplotlib" in sys.modules)\n'
        'build(dict(type="FakeData", size=2), DATASETS, "data.train")\n'
        'print("torchvision" in sys.modules)\n')
    out = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True,
                         timeout=120, cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                             os.path.abspath(__file__)))))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-3:] == ['False', 'False', 'True']


def test_wrapping_your_own_pairs_and_a_class_count_mismatch_warning(caplog):
    pairs = [(torch.full((3, 2, 2), float(i)), i % 2) for i in range(4)]
    dataset = ImageClassificationDataset(pairs, classes=['cat', 'dog'])
    assert dataset[3]['gt_label'].item() == 1 and dataset.get_gt_labels().tolist() == [0, 1, 0, 1]
    scores = torch.tensor([[.9, .1, 0.], [.1, .9, 0.], [.2, .7, .1], [.1, .8, .1]])
    logger = logging.getLogger('mtrain.test.mismatch')
    with caplog.at_level('WARNING', logger=logger.name):
        results = dataset.evaluate(scores, 'per_class', logger=logger)
    assert 'model.head.num_classes=2' in caplog.text
    assert results['recall_1'] == 1.0 and results['recall_0'] == 0.5
