"""mmcv's module name for the LR policies; they live in :mod:`mtrain.hooks.schedules`."""

from .schedules.lr import *  # noqa: F401,F403
from .schedules.lr import __all__  # noqa: F401
