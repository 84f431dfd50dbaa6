"""mmcv's module name for the momentum policies; they live in :mod:`mtrain.hooks.schedules`."""

from .schedules.momentum import *  # noqa: F401,F403
from .schedules.momentum import __all__  # noqa: F401
