"""The optimizer step: one object owns backward, accumulation, loss scaling, clipping and the update.

Built by the optimizer hooks from ``optimizer_config`` / ``fp16``; the batch
processors call it; it imports nothing from the rest of mtrain but ``utils``.
"""

from .amp import check_autocast_support, parse_dtype, parse_loss_scale
from .optim_step import STEPPED, STEPPED_DEFERRED, OptimStep, UpdateResult

__all__ = ['OptimStep', 'STEPPED', 'STEPPED_DEFERRED', 'UpdateResult',
           'check_autocast_support', 'parse_dtype', 'parse_loss_scale']
