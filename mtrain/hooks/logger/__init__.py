"""Logger hooks: text and JSON, TensorBoard event files, a progress bar.

The TensorBoard and tqdm imports happen when such a hook starts a run, so
importing this package stays cheap.
"""

from .base import LoggerHook
from .progress import ProgressBarHook
from .tensorboard import TensorboardLoggerHook
from .text import TextLoggerHook

__all__ = ['LoggerHook', 'ProgressBarHook', 'TensorboardLoggerHook', 'TextLoggerHook']
