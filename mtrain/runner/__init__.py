"""Runners (the loops), checkpoint files, and the config → runner builder.

Also mmcv.runner's model-side names: ``BaseModule`` & co. and the fp16 decorators.
"""

from ..models.base_module import BaseModule, ModuleDict, ModuleList, Sequential
from ..models.fp16_utils import LossScaler, auto_fp16, force_fp32, wrap_fp16_model
from .base_runner import BaseRunner, Preempted
from .builder import build_dataset, build_runner, build_test_loader
from .checkpoint import (CheckpointError, find_latest_valid, get_state_dict, load_checkpoint,
                         load_checkpoint_file, load_checkpoint_with_prefix, load_state_dict,
                         save_checkpoint, save_checkpoint_file, weights_to_cpu)
from .epoch_based_runner import EpochBasedRunner
from .iter_based_runner import IterBasedRunner
from .iter_loader import IterLoader
from .log_buffer import LogBuffer

__all__ = [
    'BaseModule', 'LossScaler', 'ModuleDict', 'ModuleList', 'Sequential', 'auto_fp16',
    'force_fp32', 'wrap_fp16_model', 'BaseRunner', 'CheckpointError', 'EpochBasedRunner', 'IterBasedRunner', 'IterLoader',
    'LogBuffer', 'Preempted', 'build_dataset', 'build_runner', 'build_test_loader',
    'find_latest_valid', 'get_state_dict', 'load_checkpoint', 'load_checkpoint_file',
    'load_checkpoint_with_prefix', 'load_state_dict', 'save_checkpoint', 'save_checkpoint_file',
    'weights_to_cpu'
]
