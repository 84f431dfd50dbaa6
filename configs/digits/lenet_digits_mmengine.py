# The digits demo written in mmengine's schema: tools/train.py reads it into mtrain's
# runner and hooks, and runs param_scheduler on mmengine's own scheduler classes.
model = dict(type='LeNet', num_classes=10, in_channels=1, width=32)
train_dataloader = dict(
    batch_size=32,
    num_workers=0,  # the whole set is in memory
    sampler=dict(type='DefaultSampler', shuffle=True),
    dataset=dict(type='DigitsDataset', split='train'))
val_dataloader = dict(
    batch_size=32,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='DigitsDataset', split='val'))
val_evaluator = dict(type='Accuracy', topk=(1, ))
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='SGD', lr=0.1, momentum=0.9, weight_decay=5e-4, nesterov=True))
# Linear warmup over the first 20 iterations, then cosine annealing by epoch.
param_scheduler = [
    dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=21),
    dict(type='CosineAnnealingLR', T_max=10, eta_min=0., by_epoch=True, begin=0, end=10),
]
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=10, val_interval=1)
val_cfg = dict(type='ValLoop')
default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=10),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', interval=1, max_keep_ckpts=3),
    sampler_seed=dict(type='DistSamplerSeedHook'))
randomness = dict(seed=0)
