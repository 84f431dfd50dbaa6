"""MultiTaskDigitsDataset and MultiTaskClassifier: one batch per task, per-task scores."""

import pytest
import torch

from mtrain.datasets import MultiTaskDigitsDataset, build_dataloader
from mtrain.models import MultiTaskClassifier

TASKS = dict(low=[0, 1, 2, 3, 4], high=[5, 6, 7, 8, 9])


def test_zip_mode_loader_yields_a_tuple_of_task_batches():
    dataset = MultiTaskDigitsDataset(TASKS, split='train')
    loader = build_dataloader(dataset, samples_per_gpu=4, workers_per_gpu=0, shuffle=False)
    low, high = next(iter(loader))
    assert low['task_name'] == ['low'] * 4 and high['task_name'] == ['high'] * 4
    assert low['img'].shape == (4, 1, 8, 8)
    assert low['gt_label'].max() < 5 and high['gt_label'].max() < 5  # each task's own labels
    assert len(dataset) == max(len(d) for d in dataset.tasks.values())


def test_concat_mode_evaluates_each_task_on_its_own_samples():
    dataset = MultiTaskDigitsDataset(TASKS, split='val', mode='concat')
    low, high = dataset.tasks['low'], dataset.tasks['high']
    assert len(dataset) == len(low) + len(high)
    assert dataset[len(low)]['task_name'] == 'high'
    scores = torch.zeros(len(dataset), 5)
    scores[torch.arange(len(low)), low.labels] = 1  # every 'low' prediction right
    scores[len(low):, 0] = 1  # every 'high' prediction says class 0
    results = dataset.evaluate(scores)
    expected_high = (high.labels == 0).float().mean().item()
    assert results['low.accuracy'] == 1.0
    assert results['high.accuracy'] == pytest.approx(expected_high)
    assert results['accuracy'] == pytest.approx((1.0 + expected_high) / 2)
    with pytest.raises(ValueError, match="mode='concat'"):
        MultiTaskDigitsDataset(TASKS).evaluate(scores)


def test_model_routes_each_sample_to_its_task_head():
    torch.manual_seed(0)
    model = MultiTaskClassifier(tasks=dict(a=3, b=5), width=4)
    img, labels = torch.randn(6, 1, 8, 8), torch.tensor([0, 1, 2, 0, 4, 3])
    names = ['a', 'a', 'a', 'b', 'b', 'b']
    loss = model(img, labels, names)['loss_cls']
    loss.backward()
    features = model.backbone(img)  # BatchNorm: statistics of the whole batch
    per_task = [model.heads[n](features[i:i + 3]) for n, i in (('a', 0), ('b', 3))]
    expected = (torch.nn.functional.cross_entropy(per_task[0], labels[:3], reduction='sum')
                + torch.nn.functional.cross_entropy(per_task[1], labels[3:], reduction='sum')) / 6
    torch.testing.assert_close(loss, expected)
    model.zero_grad()
    model(img[:3], labels[:3], 'a')['loss_cls'].backward()
    assert all(p.grad is None for p in model.heads['b'].parameters())  # one task: one head
    model.eval()
    scores = model(img, task_name=names)
    assert scores.shape == (6, 5) and torch.all(scores[:3, 3:] == 0)
    torch.testing.assert_close(scores.sum(dim=1), torch.ones(6))
    with pytest.raises(ValueError, match="unknown task\\(s\\) \\['c'\\]"):
        model(img, task_name='c')
