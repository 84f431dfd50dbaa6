"""Rotated-box IoU (``box_iou_rotated``) and rotated NMS (``nms_rotated``), vectorised over pairs.

mmcv's kernel (``box_iou_rotated_utils.hpp``) intersects two rotated
rectangles one pair at a time: it shifts both centres by their mean (in
double), builds the corners (``cos``/``sin`` in double, the rest in the
box dtype), collects up to 24 candidate points (16 edge crossings, then the
corners of each box inside the other), orders them with a Graham scan and
sums a triangle fan. Here every step runs on all pairs at once with the same
arithmetic up to the candidate points, which are therefore bitwise the
kernel's; the scan is replaced by sorting the valid candidates by angle
around the lowest one (they all lie on the convex intersection polygon, so
that order is the polygon's) and summing the fan over every sorted slot in
order. Duplicate and collinear candidates, which the scan drops, add
zero-area triangles here, so the area can differ from mmcv's in the last
bits (a few ulp of the IoU; bench/compare_ops_compiled.py measures it).

``nms_rotated`` follows the kernel of the tensors' device: on CPU mmcv's
kernel ignores ``labels`` (it suppresses across classes), on CUDA it keeps
boxes of different labels apart when ``multi_label``; the greedy pass is
sequential by definition and walks a precomputed suppression matrix.
"""

import torch
from torch import Tensor

#: Pairs per chunk: bounds the (pairs, 24, 2) temporaries to some tens of MB.
CHUNK = 1 << 15


def _compute_dtype(t: Tensor) -> torch.dtype:
    return t.dtype if t.dtype in (torch.float32, torch.float64) else torch.float32


def _corners(ctr: Tensor, w: Tensor, h: Tensor, a: Tensor) -> Tensor:
    """(P, 4, 2) corners in mmcv's order and arithmetic (``get_rotated_vertices``)."""
    c = torch.cos(a.double()).to(w.dtype) * 0.5
    s = torch.sin(a.double()).to(w.dtype) * 0.5
    x, y = ctr.unbind(-1)
    p0 = torch.stack((x - s * h - c * w, y + c * h - s * w), -1)
    p1 = torch.stack((x + s * h - c * w, y - c * h - s * w), -1)
    return torch.stack((p0, p1, 2 * ctr - p0, 2 * ctr - p1), 1)


def _cross(a: Tensor, b: Tensor) -> Tensor:
    return a[..., 0] * b[..., 1] - b[..., 0] * a[..., 1]


def _dot(a: Tensor, b: Tensor) -> Tensor:
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1]


def _inside(pts: Tensor, box: Tensor) -> Tensor:
    """Which of ``pts`` (P, 4, 2) lie in the rectangle ``box`` (P, 4, 2), as mmcv tests it."""
    ab, da = box[:, 1] - box[:, 0], box[:, 0] - box[:, 3]
    ap = pts - box[:, None, 0]
    along, across = _dot(ap, ab[:, None]), -_dot(ap, da[:, None])
    return (along >= 0) & (across >= 0) & (along <= _dot(ab, ab)[:, None]) & \
        (across <= _dot(da, da)[:, None])


def _candidates(pts1: Tensor, pts2: Tensor):
    """(P, 24, 2) candidate points and (P, 24) validity (``get_intersection_points``)."""
    vec1 = pts1.roll(-1, 1) - pts1  # edge i: corner i -> corner i+1
    vec2 = pts2.roll(-1, 1) - pts2
    v1, v2 = vec1[:, :, None], vec2[:, None]  # (P, i, j, 2)
    det = _cross(v2, v1)
    vec12 = pts2[:, None] - pts1[:, :, None]
    t1 = _cross(v2, vec12) / det
    t2 = _cross(v1, vec12) / det
    hit = (det.abs() > 1e-14) & (t1 >= 0) & (t1 <= 1) & (t2 >= 0) & (t2 <= 1)
    cross_pts = pts1[:, :, None] + v1 * t1[..., None]
    pts = torch.cat((cross_pts.flatten(1, 2), pts1, pts2), 1)
    valid = torch.cat((hit.flatten(1), _inside(pts1, pts2), _inside(pts2, pts1)), 1)
    return torch.where(valid[..., None], pts, 0.0), valid  # no NaN from parallel edges


def _polygon_area(pts: Tensor, valid: Tensor) -> Tensor:
    """Area of the convex hull of each pair's valid points (0 with fewer than 3)."""
    big = torch.finfo(pts.dtype).max
    y = torch.where(valid, pts[..., 1], big)
    x = torch.where(valid & (y == y.min(1, keepdim=True).values), pts[..., 0], big)
    anchor = torch.gather(pts, 1, x.argmin(1)[:, None, None].expand(-1, 1, 2))
    q = pts - anchor
    angle = torch.atan2(q[..., 1], q[..., 0])
    angle = torch.where(_dot(q, q) > 1e-8, angle, -1.0)  # the anchor and its copies first
    order = torch.where(valid, angle, 10.0).argsort(1)
    q = torch.gather(q, 1, order[..., None].expand(-1, -1, 2))
    ok = torch.gather(valid, 1, order)
    tri = torch.where(ok[:, 2:], _cross(q[:, 1:-1], q[:, 2:]).abs(), 0.0)
    area = torch.zeros_like(tri[:, 0])
    for i in range(tri.shape[1]):  # in the fan's order, as the kernel adds (22 slots)
        area = area + tri[:, i]
    return torch.where(valid.sum(1) > 2, area / 2, 0.0)


def _near(b1: Tensor, b2: Tensor) -> Tensor:
    """Pairs whose circumscribed circles meet (with a margin): the others intersect in 0."""
    r = (b1[:, 2:4].double().norm(dim=1) + b2[:, 2:4].double().norm(dim=1)) / 2
    d = (b1[:, :2].double() - b2[:, :2].double()).norm(dim=1)
    return d <= r * 1.001 + 1e-3


def _chunk_ious(p: Tensor, q: Tensor, mode_flag: int, dtype: torch.dtype) -> Tensor:
    shift = (p[:, :2].double() + q[:, :2].double()) / 2.0
    p, q = p.to(dtype), q.to(dtype)
    pts1 = _corners((p[:, :2].double() - shift).to(dtype), p[:, 2], p[:, 3], p[:, 4])
    pts2 = _corners((q[:, :2].double() - shift).to(dtype), q[:, 2], q[:, 3], q[:, 4])
    inter = _polygon_area(*_candidates(pts1, pts2))
    area1, area2 = p[:, 2] * p[:, 3], q[:, 2] * q[:, 3]
    base = area1 + area2 - inter if mode_flag == 0 else area1
    iou = inter / base if mode_flag in (0, 1) else inter
    return torch.where((area1 < 1e-14) | (area2 < 1e-14), 0.0, iou)


def pair_ious(b1: Tensor, b2: Tensor, mode_flag: int) -> Tensor:
    """IoU (mode 0) or IoF (mode 1) of the pairs ``b1[k]``, ``b2[k]`` ((P, 5) each).

    Pairs too far apart to touch are 0 without computing (mmcv's kernel finds
    no intersection point for them and returns ``0 / base``, also 0).
    """
    dtype = _compute_dtype(b1)
    out = b1.new_zeros(b1.shape[0], dtype=dtype)
    near = _near(b1, b2).nonzero()[:, 0]
    for s in range(0, near.numel(), CHUNK):
        k = near[s:s + CHUNK]
        out[k] = _chunk_ious(b1[k], b2[k], mode_flag, dtype)
    return out


def box_iou_rotated(boxes1: Tensor, boxes2: Tensor, ious: Tensor, mode_flag: int = 0,
                    aligned: bool = False) -> None:
    """Fills ``ious`` (N,) aligned or (N*M,) all pairs, row-major as mmcv's kernel."""
    if aligned:
        b1, b2 = boxes1[:ious.numel()], boxes2[:ious.numel()]
    else:
        n, m = boxes1.shape[0], boxes2.shape[0]
        b1 = boxes1[:, None].expand(n, m, boxes1.shape[1]).reshape(n * m, boxes1.shape[1])
        b2 = boxes2[None].expand(n, m, boxes2.shape[1]).reshape(n * m, boxes2.shape[1])
    ious.copy_(pair_ious(b1[:, :5], b2[:, :5], mode_flag).view_as(ious))


def nms_rotated(dets: Tensor, scores: Tensor, order: Tensor, dets_sorted: Tensor,
                labels: Tensor, iou_threshold: float, multi_label: int) -> Tensor:
    """Kept indices into ``dets``, highest score first (mmcv's ``nms_rotated``)."""
    if dets.numel() == 0:
        return dets.new_zeros(0, dtype=torch.long)
    order = scores.sort(0, descending=True)[1]  # as both kernels sort
    boxes = dets[order, :5]
    n = boxes.shape[0]
    i, j = torch.triu_indices(n, n, 1, device=dets.device)
    over = torch.zeros(n, n, dtype=torch.bool, device=dets.device)
    over[i, j] = pair_ious(boxes[i], boxes[j], 0) >= iou_threshold
    if multi_label and dets.is_cuda:  # mmcv's CUDA kernel only: labels kept apart
        lab = dets[order, 5]
        over &= lab[:, None] == lab[None]
    over = over.cpu()
    removed = torch.zeros(n, dtype=torch.bool)
    keep = []
    for k in range(n):  # greedy: each kept box suppresses its row
        if not removed[k]:
            keep.append(k)
            removed |= over[k]
    return order[torch.tensor(keep, device=dets.device)]


ENTRY_POINTS = {'box_iou_rotated': box_iou_rotated, 'nms_rotated': nms_rotated}
