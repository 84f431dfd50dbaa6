"""Logger hooks: text and JSON now; TensorBoard and progress bars plug in the same way."""

from .base import LoggerHook
from .text import TextLoggerHook

__all__ = ['LoggerHook', 'TextLoggerHook']
