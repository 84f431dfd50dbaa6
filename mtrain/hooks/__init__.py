"""Hooks: everything a run does around the loop, one concern per file."""

from . import lr_updater, momentum_updater
from .checkpoint import CheckpointHook
from .early_stopping import EarlyStoppingHook
from .ema import EMAHook
from .evaluation import EvalHook
from .fp16 import Fp16OptimizerHook, GradientCumulativeFp16OptimizerHook
from .hook import STAGES, Hook
from .iter_timer import IterTimerHook
from .logger import (ClearMLLoggerHook, DvcliveLoggerHook, LoggerHook, MlflowLoggerHook,
                     NeptuneLoggerHook, PaviLoggerHook, ProgressBarHook, SegmindLoggerHook,
                     TensorboardLoggerHook, TextLoggerHook, TrackerLoggerHook, WandbLoggerHook)
from .lr_updater import *  # noqa: F401,F403  (every LR policy, by mmcv name)
from .momentum_updater import *  # noqa: F401,F403
from .nan_guard import NanGuardHook, NonFiniteLossError
from .optimizer import GradientCumulativeOptimizerHook, OptimizerHook
from .profiler import ProfilerHook
from .sampler_seed import DistSamplerSeedHook
from .torch_lr import TorchLrUpdaterHook

__all__ = [
    'STAGES', 'CheckpointHook', 'DistSamplerSeedHook', 'EarlyStoppingHook', 'EMAHook',
    'EvalHook', 'Fp16OptimizerHook', 'GradientCumulativeFp16OptimizerHook',
    'GradientCumulativeOptimizerHook', 'Hook', 'IterTimerHook', 'LoggerHook',
    'NanGuardHook', 'NonFiniteLossError', 'OptimizerHook', 'ProfilerHook', 'ProgressBarHook',
    'TensorboardLoggerHook', 'TextLoggerHook', 'TorchLrUpdaterHook',
    # experiment trackers (mmcv 1.x names), and the two that only explain why not
    'ClearMLLoggerHook', 'DvcliveLoggerHook', 'MlflowLoggerHook', 'NeptuneLoggerHook',
    'PaviLoggerHook', 'SegmindLoggerHook', 'TrackerLoggerHook', 'WandbLoggerHook'
] + lr_updater.__all__ + momentum_updater.__all__
