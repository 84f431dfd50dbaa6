"""Hooks: everything a run does around the loop, one concern per file."""

from .checkpoint import CheckpointHook
from .early_stopping import EarlyStoppingHook
from .evaluation import EvalHook
from .hook import STAGES, Hook
from .iter_timer import IterTimerHook
from .logger import LoggerHook, TextLoggerHook
from .nan_guard import NanGuardHook, NonFiniteLossError
from .optimizer import GradientCumulativeOptimizerHook, OptimizerHook
from .sampler_seed import DistSamplerSeedHook

__all__ = [
    'STAGES', 'CheckpointHook', 'DistSamplerSeedHook', 'EarlyStoppingHook', 'EvalHook',
    'GradientCumulativeOptimizerHook', 'Hook', 'IterTimerHook', 'LoggerHook',
    'NanGuardHook', 'NonFiniteLossError', 'OptimizerHook', 'TextLoggerHook'
]
