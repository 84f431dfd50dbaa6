# Logging, checkpoints and the workflow shared by every config.
checkpoint_config = dict(interval=1, max_keep_ckpts=3)
log_config = dict(interval=10, hooks=[dict(type='TextLoggerHook')])
custom_hooks = []
workflow = [('train', 1)]
load_from = None
resume_from = None
# Read by --launcher pytorch/slurm only; backend defaults to nccl on CUDA, gloo on the CPU.
dist_params = dict()
# OpenMMLab 1.x runtime key, accepted for compatibility (no effect).
log_level = 'INFO'
