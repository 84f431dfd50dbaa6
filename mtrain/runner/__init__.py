"""Runners (the loops), checkpoint files, and the config → runner builder."""

from .base_runner import BaseRunner, Preempted
from .builder import build_dataset, build_runner, build_test_loader
from .checkpoint import (CheckpointError, find_latest_valid, load_checkpoint_file,
                         save_checkpoint_file)
from .epoch_based_runner import EpochBasedRunner
from .iter_based_runner import IterBasedRunner
from .iter_loader import IterLoader
from .log_buffer import LogBuffer

__all__ = [
    'BaseRunner', 'CheckpointError', 'EpochBasedRunner', 'IterBasedRunner', 'IterLoader',
    'LogBuffer', 'Preempted', 'build_dataset', 'build_runner', 'build_test_loader',
    'find_latest_valid', 'load_checkpoint_file', 'save_checkpoint_file'
]
