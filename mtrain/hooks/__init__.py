"""Hooks: everything a run does around the loop, one concern per file."""

from .checkpoint import CheckpointHook
from .evaluation import EvalHook
from .hook import STAGES, Hook
from .iter_timer import IterTimerHook
from .logger import LoggerHook, TextLoggerHook
from .optimizer import GradientCumulativeOptimizerHook, OptimizerHook
from .sampler_seed import DistSamplerSeedHook

__all__ = [
    'STAGES', 'CheckpointHook', 'DistSamplerSeedHook', 'EvalHook',
    'GradientCumulativeOptimizerHook', 'Hook', 'IterTimerHook', 'LoggerHook',
    'OptimizerHook', 'TextLoggerHook'
]
