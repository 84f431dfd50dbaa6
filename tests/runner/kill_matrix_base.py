# The kill-anywhere matrix's base config (tests/runner/test_kill_anywhere.py adds one
# combination's keys with --cfg-options). A small MLP on three digit classes: 428 train
# images, 14 iterations per epoch in one process and 7 on two, neither a multiple of 3.
custom_imports = dict(imports=['kill_hook'], allow_failed_imports=False)
model = dict(type='MLPClassifier', in_dim=64, hidden=32, num_classes=3)
data = dict(samples_per_gpu=32, workers_per_gpu=0,
            train=dict(type='DigitsDataset', split='train', classes=[0, 1, 2]),
            val=dict(type='DigitsDataset', split='val', classes=[0, 1, 2]))
optimizer = dict(type='SGD', lr=0.05, momentum=0.9, weight_decay=1e-4)
optimizer_config = dict(grad_clip=None)
lr_config = dict(policy='step', step=[2], by_epoch=True)
runner = dict(type='EpochBasedRunner', max_epochs=4)
checkpoint_config = dict(interval=1)
log_config = dict(interval=5, hooks=[dict(type='TextLoggerHook')])
custom_hooks = [dict(type='KillAtHook')]
workflow = [('train', 1)]
seed = 0
