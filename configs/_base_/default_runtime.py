# Logging, checkpoints and the workflow shared by every config.
checkpoint_config = dict(interval=1, max_keep_ckpts=3)
# The text log (.log and .log.json files) and, on a terminal, a tqdm progress bar with the
# log lines above it (plain 'progress:' lines with the ETA when output is not a terminal).
log_config = dict(interval=10, hooks=[dict(type='TextLoggerHook'), dict(type='ProgressBarHook')])
custom_hooks = []
workflow = [('train', 1)]
load_from = None
resume_from = None
# Read by --launcher pytorch/slurm only; backend defaults to nccl on CUDA, gloo on the CPU.
dist_params = dict()
# OpenMMLab 1.x runtime key, accepted for compatibility (no effect).
log_level = 'INFO'
