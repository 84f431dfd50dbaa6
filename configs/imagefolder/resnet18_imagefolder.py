# Train a ResNet-18 from scratch on a folder of your own images:
#   python tools/train.py configs/imagefolder/resnet18_imagefolder.py \
#       --cfg-options data_root=/path/to/images model.head.num_classes=<number of class folders>
_base_ = [
    '../_base_/models/resnet18.py', '../_base_/datasets/imagefolder.py',
    '../_base_/default_runtime.py'
]
seed = 0
model = dict(head=dict(num_classes=3))  # must equal the number of class folders in train/
optimizer = dict(type='SGD', lr=0.05, momentum=0.9, weight_decay=1e-4, nesterov=True)
optimizer_config = dict(grad_clip=None)
lr_config = dict(policy='CosineAnnealing', min_lr=0.0, warmup='linear', warmup_iters=1,
                 warmup_by_epoch=True, warmup_ratio=0.1)  # one epoch of warm-up
runner = dict(type='EpochBasedRunner', max_epochs=30)
# On a GPU, for speed: mixed precision with fp16 = dict(loss_scale='dynamic') (float16) or
# dict(dtype='bfloat16') (docs/mixed_precision.md; on the command line:
# --cfg-options fp16.dtype=bfloat16), and channels_last=True below.
batch_processor = dict(type='BasicBatchProcessor', channels_last=False)
# A ResNet-18 checkpoint with its optimizer state is ~86 MB: keep the newest and the best
# (evaluation.save_best), and write one every 5 epochs (and at the end).
checkpoint_config = dict(interval=5, max_keep_ckpts=1)
