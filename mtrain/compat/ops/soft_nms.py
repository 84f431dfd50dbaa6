"""``softnms``: mmcv's Soft-NMS (CPU only in mmcv too), step for step.

Soft-NMS is sequential: each step takes the highest remaining score, which
depends on every earlier step's re-weighting, so the loop over steps stays;
each step is vectorised over the remaining boxes. mmcv's kernel keeps its
boxes in one array, swaps the maximum to the front and drops a box whose
score falls below ``min_score`` by moving the last box into its slot; the
order that leaves decides ties between equal scores and the order of the
returned indices, so :func:`_drop_low` reproduces that compaction exactly.
Arithmetic is float32 as mmcv's; the gaussian method's ``exp`` is taken in
float64 and rounded, where mmcv calls glibc's ``expf``, which differs from
that by one ulp for about 0.08% of arguments (so a gaussian score can differ
in its last bit from mmcv-full's; the kept boxes and their order did not in
the comparison of docs/migration.md).
"""

import numpy as np
import torch
from torch import Tensor

METHODS = {0: 'naive', 1: 'linear', 2: 'gaussian'}


def softnms(boxes: Tensor, scores: Tensor, dets: Tensor, iou_threshold: float, sigma: float,
            min_score: float, method: int, offset: int) -> Tensor:
    """Indices kept, in the order picked; fills ``dets[:k]`` with ``(x1, y1, x2, y2, score)``."""
    if boxes.numel() == 0:
        return torch.empty(0, dtype=torch.long)
    b = boxes.detach().cpu().numpy().astype(np.float32)
    # columns: x1, y1, x2, y2, score, area; kept in one array so rows move together
    rows = np.empty((b.shape[0], 6), dtype=np.float32)
    rows[:, :4] = b[:, :4]
    rows[:, 4] = scores.detach().cpu().numpy()
    rows[:, 5] = (b[:, 2] - b[:, 0] + offset) * (b[:, 3] - b[:, 1] + offset)
    inds = np.arange(b.shape[0])
    out = np.empty((b.shape[0], 5), dtype=np.float32)
    f = np.float32
    thr, sig, low = f(iou_threshold), f(sigma), f(min_score)
    n, i = b.shape[0], 0
    while i < n:
        top = _first_max(rows[i:n, 4]) + i
        rows[[i, top]], inds[[i, top]] = rows[[top, i]], inds[[top, i]]
        out[i] = rows[i, :5]
        rest = rows[i + 1:n]
        rest[:, 4] *= _weights(_overlaps(rows[i], rest, f(offset)), method, thr, sig)
        n = i + 1 + _drop_low(rest, inds[i + 1:n], low)
        i += 1
    dets[:n].copy_(torch.from_numpy(out[:n]))
    return torch.from_numpy(inds[:n].copy())


def _first_max(scores: np.ndarray) -> int:
    """mmcv's scan ``if (max < sc[pos])`` from ``sc[0]``: first maximum; NaN never wins."""
    if np.isnan(scores[0]):
        return 0  # nothing compares greater than the NaN it starts from
    return int(np.argmax(np.where(np.isnan(scores), -np.inf, scores)))


def _overlaps(top: np.ndarray, rest: np.ndarray, offset: np.float32) -> np.ndarray:
    w = np.maximum(np.float32(0), np.minimum(top[2], rest[:, 2]) -
                   np.maximum(top[0], rest[:, 0]) + offset)
    h = np.maximum(np.float32(0), np.minimum(top[3], rest[:, 3]) -
                   np.maximum(top[1], rest[:, 1]) + offset)
    inter = w * h
    with np.errstate(invalid='ignore', divide='ignore'):  # 0/0 for empty boxes: NaN, as in C
        return inter / (top[5] + rest[:, 5] - inter)


def _weights(ovr: np.ndarray, method: int, thr: np.float32, sigma: np.float32) -> np.ndarray:
    if method == 0:
        return np.where(ovr >= thr, np.float32(0), np.float32(1))
    if method == 1:
        return np.where(ovr >= thr, np.float32(1) - ovr, np.float32(1))
    if method == 2:
        exponent = -(ovr * ovr) / sigma  # float32, as mmcv
        return np.exp(exponent.astype(np.float64)).astype(np.float32)
    return np.ones_like(ovr)  # mmcv: any other method leaves the scores as they are


def _drop_low(rows: np.ndarray, inds: np.ndarray, low: np.float32) -> int:
    """Compacts ``rows``/``inds`` in place as mmcv does; returns how many remain.

    mmcv walks forward and fills each slot whose score is below ``low`` with
    the last remaining row (dropping low ones from the end first), i.e. the
    low slots among the first ``k`` (``k`` = rows that stay), in order, take
    the staying rows beyond ``k`` from the back.
    """
    stay = ~(rows[:, 4] < low)
    k = int(stay.sum())
    holes = np.flatnonzero(~stay[:k])
    movers = np.flatnonzero(stay[k:])[::-1] + k
    rows[holes], inds[holes] = rows[movers], inds[movers]
    return k


ENTRY_POINTS = {'softnms': softnms}
