"""Write tiny data and a BYOL config for the mmselfsup 0.11 comparison (run with venv-mmcv's python).

``python mmselfsup_e2e_setup.py ROOT`` writes, under ROOT:

* ``ssl/train/<class>/*.png``: 16 32x32 RGB images (two folders, as ImageNet's
  layout; the labels are unused by BYOL);
* ``byol.py``: an mmselfsup 0.x BYOL config in the shape of
  ``configs/selfsup/byol/byol_resnet50_8xb32-accum16-coslr-200e_in1k.py``:
  ResNet-18 online/target networks, ``NonLinearNeck`` and ``LatentPredictHead``,
  two augmented views (``MultiViewDataset``), LARS with ``paramwise_options``,
  cosine lr with linear warmup, mmselfsup's own ``DistOptimizerHook`` accumulating
  gradients over 2 iterations and its ``BYOLHook`` (``MomentumUpdateHook``)
  updating the target network every 2 iterations (its momentum logged by
  ``mmselfsup_log_momentum.py``); ``EpochBasedRunner``, 3 epochs;
* ``byol_fixed_lr.py``: the same with SGD, SimSiam's fixed predictor lr and
  mmselfsup's ``StepFixCosineAnnealing`` lr policy (see ``FIXED_LR_CONFIG``).

Nothing is downloaded; the data is drawn from a fixed numpy seed.
"""

import os
import os.path as osp
import sys

import cv2
import numpy as np

BYOL_CONFIG = '''
model = dict(
    type='BYOL',
    base_momentum=0.9,
    backbone=dict(type='ResNet', depth=18, in_channels=3, out_indices=[4],
                  norm_cfg=dict(type='BN')),
    neck=dict(type='NonLinearNeck', in_channels=512, hid_channels=64, out_channels=32,
              num_layers=2, with_bias=True, with_last_bn=False, with_avg_pool=True,
              norm_cfg=dict(type='BN1d')),
    head=dict(type='LatentPredictHead',
              predictor=dict(type='NonLinearNeck', in_channels=32, hid_channels=64,
                             out_channels=32, num_layers=2, with_bias=True,
                             with_last_bn=False, with_avg_pool=False,
                             norm_cfg=dict(type='BN1d'))))
img_norm_cfg = dict(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
view = [
    dict(type='RandomResizedCrop', size=32, scale=(0.5, 1.)),
    dict(type='RandomHorizontalFlip'),
    dict(type='RandomAppliedTrans',
         transforms=[dict(type='ColorJitter', brightness=0.4, contrast=0.4, saturation=0.2,
                          hue=0.1)], p=0.8),
    dict(type='RandomGrayscale', p=0.2),
    dict(type='ToTensor'),
    dict(type='Normalize', **img_norm_cfg),
]
data = dict(
    samples_per_gpu=4, workers_per_gpu=0,
    train=dict(type='MultiViewDataset',
               data_source=dict(type='ImageNet', data_prefix='{root}/ssl/train'),
               num_views=[1, 1], pipelines=[view, view], prefetch=False))
update_interval = 2  # accumulate gradients over 2 iterations (mmselfsup's DistOptimizerHook)
custom_imports = dict(imports=['mmselfsup_log_momentum'], allow_failed_imports=False)
custom_hooks = [dict(type='BYOLHook', end_momentum=1., update_interval=update_interval),
                dict(type='LogTargetMomentum')]  # logs the momentum BYOLHook set
optimizer = dict(type='LARS', lr=0.3, momentum=0.9, weight_decay=1e-6,
                 paramwise_options={
                     '(bn|gn)(\\\\d+)?.(weight|bias)': dict(weight_decay=0., lars_exclude=True),
                     'bias': dict(weight_decay=0., lars_exclude=True)})
optimizer_config = dict(update_interval=update_interval)
lr_config = dict(policy='CosineAnnealing', min_lr=0., warmup='linear', warmup_iters=2,
                 warmup_ratio=1e-4, warmup_by_epoch=False)
runner = dict(type='EpochBasedRunner', max_epochs=3)
checkpoint_config = dict(interval=1)
log_config = dict(interval=1, hooks=[dict(type='TextLoggerHook')])
dist_params = dict(backend='gloo')
cudnn_benchmark = False
log_level = 'INFO'
load_from = None
resume_from = None
workflow = [('train', 1)]
persistent_workers = False
opencv_num_threads = 0
mp_start_method = 'fork'
'''


#: mmselfsup's other lr machinery on the same model: SimSiam's fixed predictor lr
#: (``paramwise_options`` ``fix_lr`` groups, its ``SimSiamHook`` at priority HIGH) and its
#: own ``LrUpdaterHook`` subclass, ``StepFixCosineAnnealing`` (``get_lr``/``get_warmup_lr``).
#: (mmselfsup 0.11's SimSiam itself cannot train: its ``forward_train(img)`` refuses the
#: ``idx`` its ``MultiViewDataset`` returns, on mmcv's runner too.)
FIXED_LR_CONFIG = '''_base_ = ['./byol.py']
custom_hooks = [dict(type='BYOLHook', end_momentum=1., update_interval=2),
                dict(type='SimSiamHook', priority='HIGH', fix_pred_lr=True, lr=0.05),
                dict(type='LogTargetMomentum')]
optimizer = dict(_delete_=True, type='SGD', lr=0.05, momentum=0.9, weight_decay=1e-4,
                 paramwise_options={'predictor': dict(fix_lr=True)})
lr_config = dict(_delete_=True, policy='StepFixCosineAnnealing', min_lr=0., warmup='linear',
                 warmup_iters=2, warmup_ratio=1e-4, warmup_by_epoch=False)
'''


def write_images(root: str, rng: np.random.Generator) -> None:
    for label in (0, 1):
        folder = osp.join(root, 'ssl', 'train', f'class_{label}')
        os.makedirs(folder, exist_ok=True)
        for i in range(8):
            img = rng.integers(0, 200, size=(32, 32, 3)) + 40 * label
            cv2.imwrite(osp.join(folder, f'{i}.png'), img.clip(0, 255).astype(np.uint8))


def main(root: str) -> None:
    write_images(root, np.random.default_rng(0))
    for name, text in (('byol.py', BYOL_CONFIG), ('byol_fixed_lr.py', FIXED_LR_CONFIG)):
        with open(osp.join(root, name), 'w') as f:
            f.write(text.replace('{root}', root))


if __name__ == '__main__':
    main(osp.abspath(sys.argv[1]))
