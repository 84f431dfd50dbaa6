"""Write tiny images and a DCGAN config for the mmgen 0.7 comparison (run with venv-mmcv's python).

``python mmgen_e2e_setup.py ROOT`` writes, under ROOT:

* ``gan/imgs/*.png``: 16 RGB images, 32x32, a bright square on noise;
* ``gan.py``: an mmgen 0.7 config over mmgen's own ``_base_/default_runtime.py``
  (found beside the installed package, as ``mim`` installs it): a small DCGAN
  (``StaticUnconditionalGAN``, a generator and a discriminator, one Adam each),
  ``DynamicIterBasedRunner`` with ``pass_training_status``, mmgen's ``Linear``
  lr policy, its EMA hook on ``generator_ema`` and ``VisualizeUnconditionalSamples``,
  checkpoints every 3 of 6 iterations;
* ``gan_eval.py``: the same with mmgen's ``GenerativeEvalHook`` every 3
  iterations on ``MeanGap`` (``mmgen_gap_metric.py``, imported by
  ``custom_imports``): mmgen's own metrics need downloaded networks (FID, IS,
  PR) or have no ``_result_dict`` for the hook to read (SWD, MS-SSIM);
* ``gan_dyn.py``: the same as ``gan.py`` with mmgen's default DDP: the whole GAN
  in one DDP whose reducer the runner passes to ``train_step``;
* ``gan_pggan.py``: a small progressive-growing GAN (4 -> 8 -> 16) as mmgen's PGGAN
  configs: optimizers built by the model and rebuilt as it grows (``optimizer =
  None``), ``PGGANFetchDataHook`` resizing the data and the sampler's batch at each
  scale (only under DDP in mmgen), WGAN-GP losses, mmgen's default DDP.

Nothing is downloaded; the data is drawn from a fixed numpy seed.
"""

import os
import os.path as osp
import sys

import cv2
import numpy as np

GAN_CONFIG = '''
_base_ = ['{configs}/_base_/default_runtime.py']
model = dict(
    type='StaticUnconditionalGAN',
    generator=dict(type='DCGANGenerator', output_scale=32, base_channels=32, noise_size=16),
    discriminator=dict(type='DCGANDiscriminator', input_scale=32, output_scale=4,
                       out_channels=1, base_channels=8),
    gan_loss=dict(type='GANLoss', gan_type='vanilla'))
train_cfg = dict(disc_steps=1, use_ema=True)
test_cfg = None
train_pipeline = [
    dict(type='LoadImageFromFile', key='real_img', io_backend='disk'),
    dict(type='Normalize', keys=['real_img'], mean=[127.5] * 3, std=[127.5] * 3, to_rgb=False),
    dict(type='ImageToTensor', keys=['real_img']),
    dict(type='Collect', keys=['real_img'], meta_keys=['real_img_path']),
]
data = dict(
    samples_per_gpu=4, workers_per_gpu=0,
    train=dict(type='UnconditionalImageDataset', imgs_root='{root}/gan/imgs',
               pipeline=train_pipeline),
    val=dict(type='UnconditionalImageDataset', imgs_root='{root}/gan/imgs',
             pipeline=train_pipeline))
optimizer = dict(
    generator=dict(type='Adam', lr=0.0002, betas=(0.5, 0.999)),
    discriminator=dict(type='Adam', lr=0.0004, betas=(0.5, 0.999)))
lr_config = dict(policy='Linear', by_epoch=False, target_lr=0, start=2, interval=1)
checkpoint_config = dict(interval=3, by_epoch=False, max_keep_ckpts=20)
log_config = dict(interval=1, hooks=[dict(type='TextLoggerHook')])
custom_hooks = [
    dict(type='VisualizeUnconditionalSamples', output_dir='training_samples', interval=3),
    dict(type='ExponentialMovingAverageHook', module_keys=('generator_ema', ),
         interp_mode='lerp', interp_cfg=dict(momentum=0.9), interval=1, priority='VERY_HIGH'),
]
total_iters = 6
runner = dict(type='DynamicIterBasedRunner', is_dynamic_ddp=False, pass_training_status=True)
use_ddp_wrapper = True
find_unused_parameters = False
dist_params = dict(backend='gloo')
cudnn_benchmark = False
'''

EVAL_CONFIG = '''
_base_ = ['./gan.py']
custom_imports = dict(imports=['mmgen_gap_metric'], allow_failed_imports=False)
evaluation = dict(type='GenerativeEvalHook', interval=3, save_best_ckpt=False,
                  metrics=dict(type='MeanGap', num_images=8))
'''

DYN_CONFIG = '''
_base_ = ['./gan.py']
use_ddp_wrapper = False
find_unused_parameters = True
runner = dict(is_dynamic_ddp=True)
'''

PGGAN_CONFIG = '''
_base_ = ['./gan_dyn.py']
model = dict(
    _delete_=True, type='ProgressiveGrowingGAN',
    generator=dict(type='PGGANGenerator', out_scale=16, noise_size=16, base_channels=64,
                   max_channels=16),
    discriminator=dict(type='PGGANDiscriminator', in_scale=16, base_channels=64, max_channels=16),
    gan_loss=dict(type='GANLoss', gan_type='wgan'),
    disc_auxiliary_loss=[
        dict(type='DiscShiftLoss', loss_weight=0.0005, data_info=dict(pred='disc_pred_fake')),
        dict(type='GradientPenaltyLoss', loss_weight=10, norm_mode='HWC',
             data_info=dict(discriminator='disc_partial', real_data='real_imgs',
                            fake_data='fake_imgs'))])
train_cfg = dict(
    _delete_=True, use_ema=True,
    nkimgs_per_scale={{'4': 0.008, '8': 0.008, '16': 0.016}},  # 8 images a scale
    transition_kimgs=0.004,
    optimizer_cfg=dict(generator=dict(type='Adam', lr=0.001, betas=(0., 0.99)),
                       discriminator=dict(type='Adam', lr=0.001, betas=(0., 0.99))),
    g_lr_base=0.001, d_lr_base=0.001,
    g_lr_schedule={{'16': 0.0015}}, d_lr_schedule={{'16': 0.0015}})
optimizer = None  # built (and rebuilt at each scale) by the model
lr_config = None
train_pipeline = [
    dict(type='LoadImageFromFile', key='real_img', io_backend='disk'),
    dict(type='Resize', keys=['real_img'], scale=(16, 16)),
    dict(type='Normalize', keys=['real_img'], mean=[127.5] * 3, std=[127.5] * 3, to_rgb=False),
    dict(type='ImageToTensor', keys=['real_img']),
    dict(type='Collect', keys=['real_img'], meta_keys=['real_img_path']),
]
data = dict(
    _delete_=True, samples_per_gpu=4, workers_per_gpu=0,
    train=dict(type='GrowScaleImgDataset', imgs_roots={{'32': '{root}/gan/imgs'}},
               pipeline=train_pipeline, gpu_samples_base=4,
               gpu_samples_per_scale={{'4': 4, '8': 4, '16': 2}}, len_per_stage=-1))
custom_hooks = [
    dict(type='VisualizeUnconditionalSamples', output_dir='training_samples', interval=3),
    dict(type='PGGANFetchDataHook', interval=1),
    dict(type='ExponentialMovingAverageHook', module_keys=('generator_ema', ), interval=1,
         priority='VERY_HIGH'),
]
total_iters = 8
'''


def write_images(root: str, rng: np.random.Generator) -> None:
    folder = osp.join(root, 'gan', 'imgs')
    os.makedirs(folder, exist_ok=True)
    for i in range(16):
        img = rng.integers(0, 120, size=(32, 32, 3))
        y, x = rng.integers(0, 16, size=2)
        img[y:y + 16, x:x + 16] += 120
        cv2.imwrite(osp.join(folder, f'{i}.png'), img.astype(np.uint8))


def main(root: str) -> None:
    import mmgen  # where mim put its configs: mmgen/.mim/configs
    configs = osp.join(osp.dirname(mmgen.__file__), '.mim', 'configs')
    write_images(root, np.random.default_rng(0))
    with open(osp.join(root, 'gan.py'), 'w') as f:
        f.write(GAN_CONFIG.replace('{root}', root).replace('{configs}', configs))
    for name, text in (('gan_eval.py', EVAL_CONFIG), ('gan_dyn.py', DYN_CONFIG),
                       ('gan_pggan.py', PGGAN_CONFIG.format(root=root))):
        with open(osp.join(root, name), 'w') as f:
            f.write(text)


if __name__ == '__main__':
    main(osp.abspath(sys.argv[1]))
