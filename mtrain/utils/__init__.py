"""Helpers that import nothing from the rest of mtrain."""

from .dist import (broadcast_object, collect_results, get_dist_info, is_main_process,
                   master_only)
from .errors import ConfigError, closest_names
from .logging import get_logger, print_log
from .priority import Priority, get_priority
from .seed import set_random_seed

__all__ = [
    'ConfigError', 'Priority', 'broadcast_object', 'collect_results', 'closest_names', 'get_dist_info', 'get_logger',
    'get_priority', 'is_main_process', 'master_only', 'print_log',
    'set_random_seed'
]
