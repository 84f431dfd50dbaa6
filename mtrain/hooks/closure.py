"""A hook made of one function (mmcv 1.x's ClosureHook)."""

from typing import Callable, List

from ..registry import HOOKS
from .hook import _FALLBACK, STAGES, Hook


@HOOKS.register_module()
class ClosureHook(Hook):
    """Call ``fn(runner)`` at the stage ``fn_name``, for a hook not worth a class.

    Example::

        runner.register_hook(ClosureHook('after_train_epoch', lambda runner: print(runner.epoch)))

    ``fn_name`` may also be a generic stage (``after_iter``, ``before_epoch``...),
    which covers both its train and val stages, as in mmcv.

    Args:
        fn_name: a hook stage, e.g. ``'after_train_iter'``.
        fn: called with the runner.
    """

    def __init__(self, fn_name: str, fn: Callable) -> None:
        stages = set(STAGES) | set(_FALLBACK.values())
        if fn_name not in stages:
            raise ValueError(f"ClosureHook fn_name '{fn_name}' is not a hook stage; use one of "
                             f"{', '.join(sorted(stages))}")
        if not callable(fn):
            raise TypeError(f'ClosureHook fn must be callable, got {type(fn).__name__}')
        self.fn_name = fn_name
        setattr(self, fn_name, fn)

    def triggered_stages(self) -> List[str]:
        return [s for s in STAGES if self.fn_name in (s, _FALLBACK.get(s))]

    def name_for(self, stage: str) -> str:
        return self.fn_name
