"""Logger hooks: text and JSON, TensorBoard event files, a progress bar, experiment trackers.

TensorBoard, tqdm and each tracker's client are imported when such a hook
starts a run, so importing this package stays cheap.
"""

from .base import LoggerHook
from .clearml import ClearMLLoggerHook
from .dvclive import DvcliveLoggerHook
from .mlflow import MlflowLoggerHook
from .progress import ProgressBarHook
from .retired import NeptuneLoggerHook, PaviLoggerHook, SegmindLoggerHook
from .tensorboard import TensorboardLoggerHook
from .text import TextLoggerHook
from .tracker import TrackerLoggerHook
from .wandb import WandbLoggerHook

__all__ = ['ClearMLLoggerHook', 'DvcliveLoggerHook', 'LoggerHook', 'MlflowLoggerHook',
           'NeptuneLoggerHook', 'PaviLoggerHook', 'ProgressBarHook', 'SegmindLoggerHook',
           'TensorboardLoggerHook', 'TextLoggerHook', 'TrackerLoggerHook', 'WandbLoggerHook']
