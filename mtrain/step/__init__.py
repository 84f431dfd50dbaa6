"""The optimizer step: backward, accumulation, loss scaling, clipping and the update.

Built by the optimizer hooks from ``optimizer_config`` / ``fp16``; the batch
processors call it; it imports nothing from the rest of mtrain but ``utils``.
One piece a file: the accumulation window (``window``), the skip verdict
(``verdict``), the update (``update``), the window's gradients in checkpoints
(``window_grads``), the logged norm (``grad_norm``) and the private torch
surface they rely on (``torch_protocol``); ``OptimStep`` runs them in order.
"""

from .amp import check_autocast_support, parse_dtype, parse_loss_scale
from .micro_batch import OutOfMemoryStop
from .optim_step import OptimStep, check_grad_clip
from .update import STEPPED, UpdateResult
from .verdict import Verdict
from .window import AccumulationWindow

__all__ = ['AccumulationWindow', 'OptimStep', 'OutOfMemoryStop', 'STEPPED', 'UpdateResult',
           'Verdict',
           'check_autocast_support', 'check_grad_clip', 'parse_dtype', 'parse_loss_scale']
