"""Seeding every RNG a run uses."""

import os
import random

import numpy as np
import torch

from .dist import get_dist_info


def set_random_seed(seed: int, deterministic: bool = False, use_rank_shift: bool = False) -> None:
    """Seed python, numpy and torch (all devices).

    Args:
        seed: the seed.
        deterministic: also ask torch for deterministic algorithms (slower).
        use_rank_shift: seed each rank with ``seed + rank`` (mmcv 1.7.2's
            keyword), so that ranks draw different randoms; rank-local.
    """
    if use_rank_shift:
        seed += get_dist_info()[0]
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    os.environ['PYTHONHASHSEED'] = str(seed)
    if deterministic:
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
        torch.use_deterministic_algorithms(True, warn_only=True)
