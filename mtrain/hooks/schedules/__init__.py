"""LR and momentum schedules: ``lr_config`` / ``momentum_config`` policies, as hooks.

The layout follows the architecture, bottom up::

    formulas.py    pure arithmetic (annealing, warmup factor, cyclic phases), mmcv's order
    base.py        ScheduleHook: mmcv's update algorithm and override points, progress, warmup
    lr_base.py     LrUpdaterHook: ScheduleHook for param_group['lr']
    lr.py          the LR policies (fixed, step, exp, poly, inv, cosine, ...)
    lr_cyclic.py   Cyclic and OneCycle LR
    momentum.py    MomentumUpdaterHook and its policies
    torch_lr.py    policy='Torch': any torch.optim.lr_scheduler, stepped per update

Every class is registered in ``HOOKS`` under its mmcv 1.x name; the old module
paths ``mtrain.hooks.lr_updater`` and ``mtrain.hooks.momentum_updater`` (mmcv's
module names) re-export them. See ``docs/schedules.md``.
"""

from . import lr, momentum
from .lr import *  # noqa: F401,F403  (every LR policy, by mmcv name)
from .momentum import *  # noqa: F401,F403
from .torch_lr import TorchLrUpdaterHook

__all__ = ['TorchLrUpdaterHook'] + lr.__all__ + momentum.__all__
