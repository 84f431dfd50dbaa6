# Your own images, one folder per class: data_root/train/<class>/*.png and data_root/val/<class>/*.png.
data_root = 'data/my_images'  # the one key to change: --cfg-options data_root=/path/to/images
img_size = 224
img_norm_cfg = dict(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])  # ImageNet statistics
train_pipeline = [
    dict(type='RandomResizedCrop', size=img_size, antialias=True),
    dict(type='RandomHorizontalFlip'),
    dict(type='ToImage'),  # PIL image -> uint8 tensor
    dict(type='ToDtype', dtype='float32', scale=True),  # -> float in [0, 1]
    dict(type='Normalize', **img_norm_cfg),
]
test_pipeline = [
    dict(type='Resize', size=img_size * 8 // 7, antialias=True),  # shorter side 256 for 224
    dict(type='CenterCrop', size=img_size),
    dict(type='ToImage'),
    dict(type='ToDtype', dtype='float32', scale=True),
    dict(type='Normalize', **img_norm_cfg),
]
data = dict(
    samples_per_gpu=32,
    workers_per_gpu=2,  # decoding and augmentation run here; raise it with more CPU cores
    train=dict(type='ImageFolder', root=data_root + '/train', pipeline=train_pipeline),
    val=dict(type='ImageFolder', root=data_root + '/val', pipeline=test_pipeline),
    test=dict(type='ImageFolder', root=data_root + '/val', pipeline=test_pipeline))
# Add 'accuracy_top5' with more than 5 classes (with 5 or fewer every label is in the top 5,
# so it is always 1.0). Each evaluation also writes confusion_matrix_epoch_N.png to the work dir.
evaluation = dict(interval=1, metric=['accuracy', 'per_class'], save_best='accuracy')
