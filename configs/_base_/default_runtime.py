# Logging, checkpoints and the workflow shared by every config.
checkpoint_config = dict(interval=1, max_keep_ckpts=3)
log_config = dict(interval=10, hooks=[dict(type='TextLoggerHook')])
custom_hooks = []
workflow = [('train', 1)]
load_from = None
resume_from = None
# OpenMMLab 1.x runtime keys, accepted for compatibility (no effect on one process).
dist_params = dict(backend='gloo')
log_level = 'INFO'
