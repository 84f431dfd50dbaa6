# Logging, checkpoints and the workflow shared by every config.
checkpoint_config = dict(interval=1, max_keep_ckpts=3)
# The text log (.log and .log.json files) and, on a terminal, a tqdm progress bar with the
# log lines above it (plain 'progress:' lines with the ETA when output is not a terminal).
log_config = dict(interval=10, hooks=[dict(type='TextLoggerHook'), dict(type='ProgressBarHook')])
# samples/s, the share of time spent waiting for data, FLOPs per iteration and MFU on each
# log line, and a one-line hint when the loader is the bottleneck (docs/logging.md).
custom_hooks = [dict(type='ThroughputMonitorHook')]
workflow = [('train', 1)]
load_from = None
resume_from = None
# Read by --launcher pytorch/slurm only; backend defaults to nccl on CUDA, gloo on the CPU.
dist_params = dict()
# OpenMMLab 1.x runtime key, accepted for compatibility (no effect).
log_level = 'INFO'
