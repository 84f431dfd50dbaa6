"""Hook priorities, named as in mmcv 1.x (lower value runs first)."""

from enum import Enum
from typing import Union


class Priority(Enum):
    HIGHEST = 0
    VERY_HIGH = 10
    HIGH = 30
    ABOVE_NORMAL = 40
    NORMAL = 50
    BELOW_NORMAL = 60
    LOW = 70
    VERY_LOW = 90
    LOWEST = 100


def get_priority(priority: Union[int, str, Priority]) -> int:
    """Turn ``'NORMAL'``, ``Priority.NORMAL`` or ``50`` into ``50``."""
    if isinstance(priority, bool):
        raise TypeError(f'priority must be an int, a str or a Priority, not {priority!r}')
    if isinstance(priority, int):
        if not 0 <= priority <= 100:
            raise ValueError(f'priority must be between 0 and 100, got {priority}')
        return priority
    if isinstance(priority, Priority):
        return priority.value
    if isinstance(priority, str):
        try:
            return Priority[priority.upper()].value
        except KeyError:
            names = ', '.join(p.name for p in Priority)
            raise ValueError(f"unknown priority '{priority}'; use one of {names} "
                             'or an integer 0-100') from None
    raise TypeError(f'priority must be an int, a str or a Priority, not {type(priority).__name__}')
