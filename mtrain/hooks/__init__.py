"""Hooks: everything a run does around the loop, one concern per file."""

from . import schedules
from .checkpoint import CheckpointHook
from .closure import ClosureHook
from .dist_evaluation import DistEvalHook
from .early_stopping import EarlyStoppingHook
from .ema import EMAHook
from .evaluation import EvalHook
from .fp16 import Fp16OptimizerHook, GradientCumulativeFp16OptimizerHook
from .hook import STAGES, Hook
from .iter_timer import IterTimerHook
from .logger import (ClearMLLoggerHook, DvcliveLoggerHook, LoggerHook, MlflowLoggerHook,
                     NeptuneLoggerHook, PaviLoggerHook, ProgressBarHook, SegmindLoggerHook,
                     TensorboardLoggerHook, TextLoggerHook, TrackerLoggerHook, WandbLoggerHook)
from .nan_guard import NanGuardHook, NonFiniteLossError
from .optimizer import GradientCumulativeOptimizerHook, OptimizerHook
from .optuna_pruning import OptunaPruningHook
from .param_scheduler import ParamSchedulerHook
from .profiler import ProfilerHook
from .sampler_seed import DistSamplerSeedHook
from .schedules import *  # noqa: F401,F403  (every LR / momentum policy, by mmcv name)
from .sync_buffer import SyncBuffersHook
from .throughput import ThroughputMonitorHook

__all__ = [
    'STAGES', 'CheckpointHook', 'ClosureHook', 'DistEvalHook', 'DistSamplerSeedHook',
    'EarlyStoppingHook', 'EMAHook', 'EvalHook', 'Fp16OptimizerHook',
    'GradientCumulativeFp16OptimizerHook', 'GradientCumulativeOptimizerHook', 'Hook',
    'IterTimerHook', 'LoggerHook', 'NanGuardHook', 'NonFiniteLossError', 'OptimizerHook',
    'OptunaPruningHook', 'ParamSchedulerHook', 'ProfilerHook', 'ProgressBarHook', 'SyncBuffersHook',
    'TensorboardLoggerHook', 'TextLoggerHook', 'ThroughputMonitorHook',
    # experiment trackers (mmcv 1.x names), and the two that only explain why not
    'ClearMLLoggerHook', 'DvcliveLoggerHook', 'MlflowLoggerHook', 'NeptuneLoggerHook',
    'PaviLoggerHook', 'SegmindLoggerHook', 'TrackerLoggerHook', 'WandbLoggerHook'
] + schedules.__all__
