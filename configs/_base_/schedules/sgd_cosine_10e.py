optimizer = dict(type='SGD', lr=0.1, momentum=0.9, weight_decay=5e-4, nesterov=True)
optimizer_config = dict(grad_clip=None)
lr_config = dict(policy='CosineAnnealing', min_lr=0.0, warmup='linear', warmup_iters=20,
                 warmup_ratio=0.1)
runner = dict(type='EpochBasedRunner', max_epochs=10)
