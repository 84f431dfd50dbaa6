"""Write tiny data and configs for the mmcls 0.x / mmseg 0.x comparison (run with venv-mmcv's python).

``python mmcv_e2e_setup.py ROOT`` writes, under ROOT:

* ``cls/train/<class>/*.png``, ``cls/val/...``: 32x32 grayscale images of two
  classes (class 1 is brighter), and ``cls.py``, an mmcls 0.x config (LeNet5,
  ``EpochBasedRunner``, step lr with linear warmup, accuracy evaluation);
* ``seg/img/*.png``, ``seg/ann/*.png``: 32x32 RGB images with a bright square and
  its mask, and ``seg.py``, an mmseg 0.x config (UNet + FCNHead,
  ``IterBasedRunner``, poly lr, mIoU evaluation).

Nothing is downloaded; the data is drawn from a fixed numpy seed.
"""

import os
import os.path as osp
import sys

import cv2
import numpy as np

CLS_CONFIG = '''
model = dict(
    type='ImageClassifier',
    backbone=dict(type='LeNet5', num_classes=2),
    neck=None,
    head=dict(type='ClsHead', loss=dict(type='CrossEntropyLoss', loss_weight=1.0)))
norm = dict(mean=[127.5], std=[127.5], to_rgb=False)
train_pipeline = [
    dict(type='LoadImageFromFile', color_type='grayscale'),
    dict(type='Normalize', **norm),
    dict(type='ImageToTensor', keys=['img']),
    dict(type='ToTensor', keys=['gt_label']),
    dict(type='Collect', keys=['img', 'gt_label']),
]
test_pipeline = [
    dict(type='LoadImageFromFile', color_type='grayscale'),
    dict(type='Normalize', **norm),
    dict(type='ImageToTensor', keys=['img']),
    dict(type='Collect', keys=['img']),
]
data = dict(
    samples_per_gpu=4, workers_per_gpu=0, persistent_workers=False,
    train=dict(type='CustomDataset', data_prefix='{root}/cls/train', pipeline=train_pipeline),
    val=dict(type='CustomDataset', data_prefix='{root}/cls/val', pipeline=test_pipeline),
    test=dict(type='CustomDataset', data_prefix='{root}/cls/val', pipeline=test_pipeline))
evaluation = dict(interval=1, metric='accuracy', metric_options=dict(topk=(1, )),
                  save_best='auto')
optimizer = dict(type='SGD', lr=0.05, momentum=0.9, weight_decay=0.0001)
optimizer_config = dict(grad_clip=None)
lr_config = dict(policy='step', step=[2], warmup='linear', warmup_iters=3, warmup_ratio=0.1)
runner = dict(type='EpochBasedRunner', max_epochs=3)
checkpoint_config = dict(interval=1)
log_config = dict(interval=1, hooks=[dict(type='TextLoggerHook')])
dist_params = dict(backend='gloo')
log_level = 'INFO'
load_from = None
resume_from = None
workflow = [('train', 1)]
'''

SEG_CONFIG = '''
norm_cfg = dict(type='BN', requires_grad=True)
model = dict(
    type='EncoderDecoder',
    pretrained=None,
    backbone=dict(
        type='UNet', in_channels=3, base_channels=4, num_stages=3, strides=(1, 1, 1),
        enc_num_convs=(1, 1, 1), dec_num_convs=(1, 1), downsamples=(True, True),
        enc_dilations=(1, 1, 1), dec_dilations=(1, 1), with_cp=False, conv_cfg=None,
        norm_cfg=norm_cfg, act_cfg=dict(type='ReLU'), upsample_cfg=dict(type='InterpConv'),
        norm_eval=False),
    decode_head=dict(
        type='FCNHead', in_channels=4, in_index=2, channels=4, num_convs=1,
        concat_input=False, dropout_ratio=0.1, num_classes=2, norm_cfg=norm_cfg,
        align_corners=False,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))
img_norm_cfg = dict(mean=[127.5, 127.5, 127.5], std=[127.5, 127.5, 127.5], to_rgb=True)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='Resize', img_scale=(32, 32), keep_ratio=True),
    dict(type='RandomFlip', prob=0.0),
    dict(type='Normalize', **img_norm_cfg),
    dict(type='Pad', size=(32, 32), pad_val=0, seg_pad_val=255),
    dict(type='DefaultFormatBundle'),
    dict(type='Collect', keys=['img', 'gt_semantic_seg']),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='MultiScaleFlipAug', img_scale=(32, 32), flip=False,
         transforms=[dict(type='Resize', keep_ratio=True),
                     dict(type='Normalize', **img_norm_cfg),
                     dict(type='ImageToTensor', keys=['img']),
                     dict(type='Collect', keys=['img'])]),
]
dataset = dict(type='CustomDataset', data_root='{root}/seg', img_dir='img', ann_dir='ann', img_suffix='.png',
               classes=('background', 'square'), palette=[[0, 0, 0], [255, 255, 255]])
data = dict(
    samples_per_gpu=4, workers_per_gpu=0, persistent_workers=False,
    train=dict(**dataset, pipeline=train_pipeline),
    val=dict(**dataset, pipeline=test_pipeline),
    test=dict(**dataset, pipeline=test_pipeline))
optimizer = dict(type='SGD', lr=0.1, momentum=0.9, weight_decay=0.0005)
optimizer_config = dict()
lr_config = dict(policy='poly', power=0.9, min_lr=1e-4, by_epoch=False)
runner = dict(type='IterBasedRunner', max_iters=9)
checkpoint_config = dict(by_epoch=False, interval=3)
evaluation = dict(interval=3, metric='mIoU', pre_eval=True)
log_config = dict(interval=1, hooks=[dict(type='TextLoggerHook', by_epoch=False)])
dist_params = dict(backend='gloo')
log_level = 'INFO'
load_from = None
resume_from = None
workflow = [('train', 1)]
cudnn_benchmark = False
'''


def write_cls(root: str, rng: np.random.Generator) -> None:
    for split, n in (('train', 8), ('val', 4)):
        for label in (0, 1):
            folder = osp.join(root, 'cls', split, f'class_{label}')
            os.makedirs(folder, exist_ok=True)
            for i in range(n):
                img = rng.integers(0, 200, size=(32, 32)) + 40 * label
                cv2.imwrite(osp.join(folder, f'{i}.png'), img.clip(0, 255).astype(np.uint8))


def write_seg(root: str, rng: np.random.Generator) -> None:
    for sub in ('img', 'ann'):
        os.makedirs(osp.join(root, 'seg', sub), exist_ok=True)
    for i in range(12):
        img = rng.integers(0, 120, size=(32, 32, 3))
        mask = np.zeros((32, 32), np.uint8)
        y, x, size = *rng.integers(0, 16, size=2), int(rng.integers(8, 16))
        mask[y:y + size, x:x + size] = 1
        img[mask == 1] += 120
        cv2.imwrite(osp.join(root, 'seg', 'img', f'{i}.png'), img.astype(np.uint8))
        cv2.imwrite(osp.join(root, 'seg', 'ann', f'{i}.png'), mask)


def main(root: str) -> None:
    rng = np.random.default_rng(0)
    write_cls(root, rng)
    write_seg(root, rng)
    for name, text in (('cls.py', CLS_CONFIG), ('seg.py', SEG_CONFIG)):
        with open(osp.join(root, name), 'w') as f:
            f.write(text.replace('{root}', root))


if __name__ == '__main__':
    main(osp.abspath(sys.argv[1]))
