import torch

from mtrain.datasets import DigitsDataset, DistributedSampler, build_dataloader


def test_fixed_stratified_split_covers_every_image_once():
    train, val = DigitsDataset('train'), DigitsDataset('val')
    assert len(train) + len(val) == 1797 and len(val) == 364
    assert torch.equal(DigitsDataset('val').labels, val.labels)  # the split never changes
    assert set(val.labels.tolist()) == set(range(10))
    item = train[0]
    assert item['img'].shape == (1, 8, 8) and 0 <= item['img'].min() and item['img'].max() <= 1


def test_class_subset_renumbers_labels():
    ds = DigitsDataset('val', classes=[3, 7])
    assert set(ds.labels.tolist()) == {0, 1} and ds.CLASSES == ('3', '7')


def test_evaluate_accuracy_from_scores():
    ds = DigitsDataset('val')
    scores = torch.nn.functional.one_hot(ds.labels, 10).float()
    scores[:10] = torch.roll(scores[:10], 1, dims=1)
    assert abs(ds.evaluate(scores)['accuracy'] - (len(ds) - 10) / len(ds)) < 1e-6


def test_sampler_order_depends_on_seed_and_epoch_only():
    ds = DigitsDataset('val')
    a, b = DistributedSampler(ds, seed=3), DistributedSampler(ds, seed=3)
    a.set_epoch(2)
    b.set_epoch(2)
    assert list(a) == list(b)
    b.set_epoch(3)
    assert list(a) != list(b)


def test_start_index_skips_only_the_next_pass():
    ds = DigitsDataset('val')
    sampler = DistributedSampler(ds, seed=0)
    full = list(sampler)
    sampler.set_start_index(100)
    assert list(sampler) == full[100:]
    assert list(sampler) == full


def test_two_ranks_split_the_data_without_overlap():
    ds = DigitsDataset('val')
    shares = [list(DistributedSampler(ds, num_replicas=2, rank=r, seed=0)) for r in (0, 1)]
    assert len(shares[0]) == len(shares[1]) == 182
    assert set(shares[0]) | set(shares[1]) == set(range(364))


def test_loader_does_not_touch_the_global_rng():
    loader = build_dataloader(DigitsDataset('val'), 32, 0, seed=0)
    state = torch.get_rng_state()
    for _ in loader:
        pass
    assert torch.equal(state, torch.get_rng_state())
