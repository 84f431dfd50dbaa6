# scikit-learn's bundled 8x8 digits: 1,433 train / 364 val images, no download.
dataset_type = 'DigitsDataset'
data = dict(
    samples_per_gpu=32,
    workers_per_gpu=0,  # the whole set is in memory; worker processes would only add latency
    train=dict(type=dataset_type, split='train'),
    val=dict(type=dataset_type, split='val'),
    test=dict(type=dataset_type, split='test'))
evaluation = dict(interval=1, metric='accuracy')
