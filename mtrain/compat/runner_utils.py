"""``mmcv.runner.utils``' helpers that 1.x scripts import from ``mmcv.runner``."""

import socket
import sys
import time
from getpass import getuser
from typing import Any, Optional


def get_host_info() -> str:
    """``user@host`` (what mmcv logs and writes into checkpoint meta)."""
    return f'{getuser()}@{socket.gethostname()}'


def get_time_str() -> str:
    """The local time as ``YYYYmmdd_HHMMSS`` (1.x log and work-dir file names)."""
    return time.strftime('%Y%m%d_%H%M%S', time.localtime())


def obj_from_dict(info: dict, parent: Optional[Any] = None,
                  default_args: Optional[dict] = None) -> Any:
    """Build ``info['type']`` with the other keys (mmcv's pre-registry builder).

    ``type`` is a class, or a name looked up as an attribute of ``parent``
    (``obj_from_dict(dict(type='SGD', lr=0.1), torch.optim, dict(params=...))``)
    or, without a parent, as a module in ``sys.modules``.

    Raises:
        AssertionError: ``info`` is not a dict with a ``type``, or
            ``default_args`` is neither a dict nor None (as mmcv).
        TypeError: ``type`` is neither a name nor a class.
    """
    assert isinstance(info, dict) and 'type' in info, 'info must be a dict with a "type"'
    assert isinstance(default_args, dict) or default_args is None
    args = info.copy()
    obj_type = args.pop('type')
    if isinstance(obj_type, str):
        obj_type = getattr(parent, obj_type) if parent is not None else sys.modules[obj_type]
    elif not isinstance(obj_type, type):
        raise TypeError(f'type must be a str or valid type, but got {type(obj_type)}')
    for name, value in (default_args or {}).items():
        args.setdefault(name, value)
    return obj_type(**args)
