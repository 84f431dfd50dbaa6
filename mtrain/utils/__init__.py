"""Helpers that import nothing from the rest of mtrain."""

from .dist import (all_ranks_true, all_reduce_mean, broadcast_object, get_dist_info,
                   is_main_process, master_only)
from .errors import ConfigError, closest_names
from .launch import destroy_dist, init_dist, report_failure
from .logging import get_logger, print_log
from .priority import Priority, get_priority
from .seed import set_random_seed

__all__ = [
    'ConfigError', 'Priority', 'all_ranks_true', 'all_reduce_mean', 'broadcast_object', 'closest_names', 'get_dist_info', 'get_logger',
    'get_priority', 'destroy_dist', 'init_dist', 'is_main_process', 'master_only', 'print_log',
    'report_failure', 'set_random_seed'
]
