"""Write tiny COCO-format data and small mmdetection 2.x configs (run with venv-mmcv's python).

``python mmdet_e2e_setup.py ROOT`` writes, under ROOT:

* ``train/*.png`` (8), ``val/*.png`` (4), ``train.json``, ``val.json``: 64x64
  dark noise images with 1-3 red or green rectangles each (2 classes), their
  boxes and polygons in COCO format (for pycocotools' bbox and segm mAP);
* ``common.py``: data, schedule and runtime (2 epochs of 4 iterations, lr x0.1 in the second,
  evaluation and a checkpoint after each epoch), the ``_base_`` of
* ``retinanet.py``, ``faster_rcnn.py``, ``mask_rcnn.py``, ``fcos.py`` and
  ``faster_rcnn_dcn.py`` (DCNv2 in ResNet stages 2-4): ResNet-18 with 8 base
  channels, FPN of 16 channels, heads cut to match.

Test-time ``score_thr`` is 0 so that every test pass reaches ``nms`` (an
untrained focal-loss head scores about 0.01, below mmdet's 0.05). Nothing is
downloaded; the data is drawn from a fixed numpy seed.
"""

import json
import os
import os.path as osp
import sys

import cv2
import numpy as np

COMMON = '''
dataset_type = 'CocoDataset'
classes = ('red', 'green')
img_norm_cfg = dict(mean=[0., 0., 0.], std=[255., 255., 255.], to_rgb=True)
with_mask = False
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(type='Resize', img_scale=(64, 64), keep_ratio=True),
    dict(type='RandomFlip', flip_ratio=0.5),  # a random draw per image: resume must replay it
    dict(type='Normalize', **img_norm_cfg),
    dict(type='Pad', size_divisor=32),
    dict(type='DefaultFormatBundle'),
    dict(type='Collect', keys=['img', 'gt_bboxes', 'gt_labels']),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='MultiScaleFlipAug', img_scale=(64, 64), flip=False,
         transforms=[dict(type='Resize', keep_ratio=True), dict(type='RandomFlip'),
                     dict(type='Normalize', **img_norm_cfg), dict(type='Pad', size_divisor=32),
                     dict(type='ImageToTensor', keys=['img']), dict(type='Collect', keys=['img'])])
]
data_root = '{root}/'
data = dict(
    samples_per_gpu=2, workers_per_gpu=0, persistent_workers=False,
    val_dataloader=dict(workers_per_gpu=0),  # mmdet's default starts 2 worker processes
    test_dataloader=dict(workers_per_gpu=0),
    train=dict(type=dataset_type, classes=classes, ann_file=data_root + 'train.json',
               img_prefix=data_root + 'train/', pipeline=train_pipeline),
    val=dict(type=dataset_type, classes=classes, ann_file=data_root + 'val.json',
             img_prefix=data_root + 'val/', pipeline=test_pipeline),
    test=dict(type=dataset_type, classes=classes, ann_file=data_root + 'val.json',
              img_prefix=data_root + 'val/', pipeline=test_pipeline))
evaluation = dict(interval=1, metric='bbox')
optimizer = dict(type='SGD', lr=0.02, momentum=0.9, weight_decay=0.0001)
optimizer_config = dict(grad_clip=dict(max_norm=10, norm_type=2))
lr_config = dict(policy='step', warmup='linear', warmup_iters=2, warmup_ratio=0.1, step=[1])
runner = dict(type='EpochBasedRunner', max_epochs=2)
checkpoint_config = dict(interval=1)
log_config = dict(interval=1, hooks=[dict(type='TextLoggerHook')])
dist_params = dict(backend='gloo')
log_level = 'INFO'
load_from = None
resume_from = None
workflow = [('train', 1)]
opencv_num_threads = 0
mp_start_method = 'fork'
auto_scale_lr = dict(enable=False, base_batch_size=16)
'''

RETINANET = '''_base_ = ['./common.py']
model = dict(
    type='RetinaNet',
    backbone=dict(type='ResNet', depth=18, base_channels=8, num_stages=4, out_indices=(0, 1, 2, 3),
                  frozen_stages=-1, norm_cfg=dict(type='BN', requires_grad=True), norm_eval=False,
                  style='pytorch', init_cfg=None),
    neck=dict(type='FPN', in_channels=[8, 16, 32, 64], out_channels=16, start_level=1,
              add_extra_convs='on_input', num_outs=3),
    bbox_head=dict(
        type='RetinaHead', num_classes=2, in_channels=16, stacked_convs=1, feat_channels=16,
        anchor_generator=dict(type='AnchorGenerator', octave_base_scale=4, scales_per_octave=3,
                              ratios=[0.5, 1.0, 2.0], strides=[8, 16, 32]),
        bbox_coder=dict(type='DeltaXYWHBBoxCoder', target_means=[.0, .0, .0, .0],
                        target_stds=[1.0, 1.0, 1.0, 1.0]),
        loss_cls=dict(type='FocalLoss', use_sigmoid=True, gamma=2.0, alpha=0.25, loss_weight=1.0),
        loss_bbox=dict(type='L1Loss', loss_weight=1.0)),
    train_cfg=dict(assigner=dict(type='MaxIoUAssigner', pos_iou_thr=0.5, neg_iou_thr=0.4,
                                 min_pos_iou=0, ignore_iof_thr=-1),
                   allowed_border=-1, pos_weight=-1, debug=False),
    test_cfg=dict(nms_pre=100, min_bbox_size=0, score_thr=0.0,  # 0: nms runs untrained too
                  nms=dict(type='nms', iou_threshold=0.5), max_per_img=20))
'''

FCOS = '''_base_ = ['./common.py']
model = dict(
    type='FCOS',
    backbone=dict(type='ResNet', depth=18, base_channels=8, num_stages=4, out_indices=(0, 1, 2, 3),
                  frozen_stages=-1, norm_cfg=dict(type='BN', requires_grad=True), norm_eval=False,
                  style='pytorch', init_cfg=None),
    neck=dict(type='FPN', in_channels=[8, 16, 32, 64], out_channels=16, start_level=1,
              add_extra_convs='on_output', num_outs=3, relu_before_extra_convs=True),
    bbox_head=dict(
        type='FCOSHead', num_classes=2, in_channels=16, stacked_convs=1, feat_channels=16,
        strides=[8, 16, 32], regress_ranges=((-1, 16), (16, 32), (32, 1e8)),
        norm_cfg=dict(type='GN', num_groups=4, requires_grad=True),  # 16 channels
        loss_cls=dict(type='FocalLoss', use_sigmoid=True, gamma=2.0, alpha=0.25, loss_weight=1.0),
        loss_bbox=dict(type='IoULoss', loss_weight=1.0),
        loss_centerness=dict(type='CrossEntropyLoss', use_sigmoid=True, loss_weight=1.0)),
    test_cfg=dict(nms_pre=100, min_bbox_size=0, score_thr=0.0,
                  nms=dict(type='nms', iou_threshold=0.5), max_per_img=20))
optimizer = dict(lr=0.01, paramwise_cfg=dict(bias_lr_mult=2., bias_decay_mult=0.))
'''

FASTER_RCNN = '''_base_ = ['./common.py']
model = dict(
    type='FasterRCNN',
    backbone=dict(type='ResNet', depth=18, base_channels=8, num_stages=4, out_indices=(0, 1, 2, 3),
                  frozen_stages=-1, norm_cfg=dict(type='BN', requires_grad=True), norm_eval=False,
                  style='pytorch', init_cfg=None),
    neck=dict(type='FPN', in_channels=[8, 16, 32, 64], out_channels=16, num_outs=4),
    rpn_head=dict(
        type='RPNHead', in_channels=16, feat_channels=16,
        anchor_generator=dict(type='AnchorGenerator', scales=[4], ratios=[0.5, 1.0, 2.0],
                              strides=[4, 8, 16, 32]),
        bbox_coder=dict(type='DeltaXYWHBBoxCoder', target_means=[.0, .0, .0, .0],
                        target_stds=[1.0, 1.0, 1.0, 1.0]),
        loss_cls=dict(type='CrossEntropyLoss', use_sigmoid=True, loss_weight=1.0),
        loss_bbox=dict(type='L1Loss', loss_weight=1.0)),
    roi_head=dict(
        type='StandardRoIHead',
        bbox_roi_extractor=dict(type='SingleRoIExtractor',
                                roi_layer=dict(type='RoIAlign', output_size=7, sampling_ratio=0),
                                out_channels=16, featmap_strides=[4, 8, 16, 32]),
        bbox_head=dict(
            type='Shared2FCBBoxHead', in_channels=16, fc_out_channels=32, roi_feat_size=7,
            num_classes=2,
            bbox_coder=dict(type='DeltaXYWHBBoxCoder', target_means=[0., 0., 0., 0.],
                            target_stds=[0.1, 0.1, 0.2, 0.2]),
            reg_class_agnostic=False,
            loss_cls=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0),
            loss_bbox=dict(type='L1Loss', loss_weight=1.0))),
    train_cfg=dict(
        rpn=dict(assigner=dict(type='MaxIoUAssigner', pos_iou_thr=0.7, neg_iou_thr=0.3,
                               min_pos_iou=0.3, match_low_quality=True, ignore_iof_thr=-1),
                 sampler=dict(type='RandomSampler', num=64, pos_fraction=0.5, neg_pos_ub=-1,
                              add_gt_as_proposals=False),
                 allowed_border=-1, pos_weight=-1, debug=False),
        rpn_proposal=dict(nms_pre=200, max_per_img=100, nms=dict(type='nms', iou_threshold=0.7),
                          min_bbox_size=0),
        rcnn=dict(assigner=dict(type='MaxIoUAssigner', pos_iou_thr=0.5, neg_iou_thr=0.5,
                                min_pos_iou=0.5, match_low_quality=True, ignore_iof_thr=-1),
                  sampler=dict(type='RandomSampler', num=64, pos_fraction=0.25, neg_pos_ub=-1,
                               add_gt_as_proposals=True),
                  mask_size=14, pos_weight=-1, debug=False)),
    test_cfg=dict(
        rpn=dict(nms_pre=200, max_per_img=100, nms=dict(type='nms', iou_threshold=0.7),
                 min_bbox_size=0),
        rcnn=dict(score_thr=0.0, nms=dict(type='nms', iou_threshold=0.5), max_per_img=20,
                  mask_thr_binary=0.5)))
'''

MASK_RCNN = '''_base_ = ['./faster_rcnn.py']
model = dict(
    type='MaskRCNN',
    roi_head=dict(
        mask_roi_extractor=dict(type='SingleRoIExtractor',
                                roi_layer=dict(type='RoIAlign', output_size=7, sampling_ratio=0),
                                out_channels=16, featmap_strides=[4, 8, 16, 32]),
        mask_head=dict(type='FCNMaskHead', num_convs=1, in_channels=16, conv_out_channels=16,
                       num_classes=2,
                       loss_mask=dict(type='CrossEntropyLoss', use_mask=True, loss_weight=1.0))))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),  # polygons -> BitmapMasks
    dict(type='Resize', img_scale=(64, 64), keep_ratio=True),
    dict(type='RandomFlip', flip_ratio=0.5),
    dict(type='Normalize', mean=[0., 0., 0.], std=[255., 255., 255.], to_rgb=True),
    dict(type='Pad', size_divisor=32),
    dict(type='DefaultFormatBundle'),
    dict(type='Collect', keys=['img', 'gt_bboxes', 'gt_labels', 'gt_masks']),
]
data = dict(train=dict(pipeline=train_pipeline))
evaluation = dict(metric=['bbox', 'segm'])
'''

FASTER_RCNN_DCN = '''_base_ = ['./faster_rcnn.py']
model = dict(
    # ResNet-18's BasicBlock takes no dcn: a ResNet-50 of 4 base channels (stage outputs 16-128)
    backbone=dict(depth=50, base_channels=4,
                  dcn=dict(type='DCNv2', deform_groups=1, fallback_on_stride=False),
                  stage_with_dcn=(False, True, True, True)),
    neck=dict(in_channels=[16, 32, 64, 128]))
'''

CONFIGS = {'common.py': COMMON, 'retinanet.py': RETINANET, 'fcos.py': FCOS,
           'faster_rcnn.py': FASTER_RCNN, 'mask_rcnn.py': MASK_RCNN,
           'faster_rcnn_dcn.py': FASTER_RCNN_DCN}


def write_split(root: str, name: str, n: int, rng: np.random.RandomState) -> None:
    """``n`` images and their COCO annotations (a box and its 4-point polygon per object)."""
    os.makedirs(osp.join(root, name), exist_ok=True)
    images, anns = [], []
    for i in range(n):
        img = (rng.rand(64, 64, 3) * 40).astype(np.uint8)
        for _ in range(rng.randint(1, 4)):
            w, h = rng.randint(12, 30, size=2)
            x, y = rng.randint(0, 64 - w), rng.randint(0, 64 - h)
            c = rng.randint(0, 2)
            img[y:y + h, x:x + w] = (200, 60, 60) if c == 0 else (60, 200, 60)
            poly = [x, y, x + w, y, x + w, y + h, x, y + h]
            anns.append(dict(id=len(anns) + 1, image_id=i + 1, category_id=int(c) + 1,
                             bbox=[float(x), float(y), float(w), float(h)],
                             area=float(w * h), iscrowd=0,
                             segmentation=[[float(v) for v in poly]]))
        cv2.imwrite(osp.join(root, name, f'{i}.png'), img)
        images.append(dict(id=i + 1, file_name=f'{i}.png', width=64, height=64))
    cats = [dict(id=1, name='red'), dict(id=2, name='green')]
    with open(osp.join(root, f'{name}.json'), 'w') as f:
        json.dump(dict(images=images, annotations=anns, categories=cats), f)


def main(root: str) -> None:
    rng = np.random.RandomState(0)
    write_split(root, 'train', 8, rng)
    write_split(root, 'val', 4, rng)
    for name, text in CONFIGS.items():
        with open(osp.join(root, name), 'w') as f:
            f.write(text.replace('{root}', root))


if __name__ == '__main__':
    main(osp.abspath(sys.argv[1]))
