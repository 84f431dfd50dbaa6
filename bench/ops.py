"""mtrain's ``mmcv._ext`` ops at detector sizes, against the obvious pure-PyTorch formulation.

``python bench/ops.py [--device cpu|cuda] [--threads 1] [--repeats 5] [--quick] [--compiled]``

For each op, the median wall time (ms) of ``--repeats`` calls after one
warm-up, with ``torch.cuda.synchronize()`` on a GPU:

- ``nms`` on 1k / 5k / 20k boxes (IoU 0.7, as an RPN): mtrain's entry point
  (torchvision's kernel after mmcv's sort), torchvision's ``nms`` alone (what
  the reordering costs) and the obvious pure-PyTorch loop (keep the top box,
  drop what overlaps it, repeat);
- ``roi_align`` forward + backward on 512 RoIs of a 4-level FPN (strides
  4-32, 256 channels, an 800x1216 image; RoIs mapped to levels as mmdet's
  ``SingleRoIExtractor`` does, output 7x7, ``sampling_ratio=0``, aligned):
  mtrain (torchvision's kernels), mtrain's vectorised path (what max mode
  and dtypes torchvision lacks use) and ``grid_sample`` per level with 2x2
  samples per bin (the obvious formulation; not mmcv's adaptive grid);
- ``sigmoid_focal_loss`` forward + backward on RetinaNet's ~120k anchors x 80
  classes: mtrain's kernels in mmcv's ``Function`` shape against mmdet's
  ``py_sigmoid_focal_loss`` through autograd;
- ``softnms`` (200 / 1000 boxes), ``nms_match`` (2k boxes), ``roi_pool`` and
  ``deform_roi_pool`` forward + backward (512 RoIs on a stride-16 map):
  mtrain only;
- ``dcn`` (DCN and DCNv2 on ResNet-50 stage 3), ``carafe``, ``msda``
  (Deformable DETR's encoder): bench/ops_dense.py says what each row is;
- ``rotated`` (box_iou_rotated, nms_rotated, roi_align_rotated at mmrotate
  sizes): bench/ops_rotated.py.

``--compiled`` adds mmcv-full's compiled kernels (``import mmcv._ext`` must
find them: a Python where bench/build_mmcv_full_cpu.sh built mmcv-full, with
its source tree on ``PYTHONPATH``) for the ops it has a CPU kernel for: nms,
roi_align, softnms, nms_match and the rotated ops.
"""

import argparse
import importlib
import statistics
import time
from typing import Callable, Dict

import torch
import torch.nn.functional as F
import torchvision

from mtrain.compat.ops import entry_points
from mtrain.compat.ops import roi_align as ra
from mtrain.compat.ops.focal_loss import sigmoid_focal_loss_backward, sigmoid_focal_loss_forward

OPS = entry_points()
COMPILED_OPS = ('nms', 'roi_align_forward', 'roi_align_backward', 'softnms', 'nms_match',
                'box_iou_rotated', 'nms_rotated', 'roi_align_rotated_forward',
                'roi_align_rotated_backward')
STRIDES = (4, 8, 16, 32)
IMAGE = (800, 1216)


def timed(fn: Callable, repeats: int, device: str) -> float:
    """Median ms of ``repeats`` calls after a warm-up."""
    fn()
    times = []
    for _ in range(repeats):
        if device == 'cuda':
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device == 'cuda':
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def boxes_and_scores(n: int, device: str, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g) * torch.tensor(IMAGE[::-1])
    wh = 16 + torch.rand(n, 2, generator=g) * 200
    return torch.cat([xy, xy + wh], 1).to(device), torch.rand(n, generator=g).to(device)


def loop_nms(boxes: torch.Tensor, scores: torch.Tensor, threshold: float) -> torch.Tensor:
    """The obvious pure-PyTorch greedy NMS: one vectorised IoU row per kept box."""
    order = scores.argsort(descending=True)
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    keep = []
    while order.numel():
        i, rest = order[0], order[1:]
        keep.append(i)
        lt = torch.maximum(boxes[i, :2], boxes[rest, :2])
        rb = torch.minimum(boxes[i, 2:], boxes[rest, 2:])
        inter = (rb - lt).clamp(min=0).prod(1)
        order = rest[inter / (area[i] + area[rest] - inter) <= threshold]
    return torch.stack(keep) if keep else order


def bench_nms(args, rows: Dict[str, float]) -> None:
    for n in ((1000, 5000) if args.quick else (1000, 5000, 20000)):
        boxes, scores = boxes_and_scores(n, args.device)
        rows[f'nms {n} boxes: mtrain'] = timed(lambda: OPS['nms'](boxes, scores, 0.7, 0),
                                               args.repeats, args.device)
        rows[f'nms {n} boxes: torchvision alone'] = timed(
            lambda: torchvision.ops.nms(boxes, scores, 0.7), args.repeats, args.device)
        rows[f'nms {n} boxes: pure-PyTorch loop'] = timed(
            lambda: loop_nms(boxes, scores, 0.7), max(1, args.repeats // 2), args.device)
        if args.compiled:
            rows[f'nms {n} boxes: mmcv-full compiled'] = timed(
                lambda: args.compiled['nms'](boxes, scores, 0.7, 0), args.repeats, args.device)


def fpn_rois(k: int, device: str):
    """``k`` RoIs per image and the FPN level mmdet's SingleRoIExtractor maps each to."""
    boxes, _ = boxes_and_scores(k, device, seed=1)
    scale = ((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])).sqrt()
    level = torch.floor(torch.log2(scale / 56 + 1e-6)).clamp(0, 3).long()
    return torch.cat([boxes.new_zeros(k, 1), boxes], 1), level


def _extract(features, rois, level, pool: Callable) -> torch.Tensor:
    out = features[0].new_zeros(rois.shape[0], features[0].shape[1], 7, 7)
    for lvl, feat in enumerate(features):
        index = (level == lvl).nonzero()[:, 0]
        if index.numel():
            out[index] = pool(feat, rois[index], 1.0 / STRIDES[lvl])
    return out


def _mtrain_roi_align(feat, rois, scale, vectorised=False, ops=OPS):
    class Fn(torch.autograd.Function):  # mmcv's RoIAlignFunction, avg mode
        @staticmethod
        def forward(ctx, x):
            ctx.shape = x.shape
            if vectorised:
                return ra.pool(x, rois, 7, 7, scale, 0, 1, True)[0]
            out = x.new_zeros(rois.shape[0], x.shape[1], 7, 7)
            empty = x.new_zeros(0)
            ops['roi_align_forward'](x, rois, out, empty, empty, 7, 7, scale, 0, 1, True)
            return out

        @staticmethod
        def backward(ctx, grad):
            grad_input = grad.new_zeros(ctx.shape)
            if vectorised:
                ra._avg_backward(grad, rois, grad_input, scale, 0, True)
            else:
                empty = grad.new_zeros(0)
                ops['roi_align_backward'](grad.contiguous(), rois, empty, empty, grad_input, 7, 7,
                                          scale, 0, 1, True)
            return grad_input
    return Fn.apply(feat)


def _grid_sample_roi_align(feat, rois, scale):
    """RoIAlign as grid_sample: 14x14 points per RoI (2x2 per bin), averaged in 2x2 blocks.

    All RoIs of the (single) image are one grid of (14 * R) x 14 points.
    """
    h, w = feat.shape[2:]
    box = rois[:, 1:] * scale - 0.5
    t = (torch.arange(14, device=feat.device) + 0.5) / 14
    xs = box[:, None, 0] + t * (box[:, None, 2] - box[:, None, 0])
    ys = box[:, None, 1] + t * (box[:, None, 3] - box[:, None, 1])
    gx = ((xs[:, None, :] + 0.5) / w * 2 - 1).expand(-1, 14, -1)
    gy = ((ys[:, :, None] + 0.5) / h * 2 - 1).expand(-1, -1, 14)
    grid = torch.stack([gx, gy], -1).reshape(1, -1, 14, 2)
    sampled = F.grid_sample(feat, grid, align_corners=False)  # (1, C, 14 R, 14)
    sampled = sampled.view(feat.shape[1], -1, 14, 14).transpose(0, 1)
    return F.avg_pool2d(sampled, 2)


def bench_roi_align(args, rows: Dict[str, float]) -> None:
    g = torch.Generator().manual_seed(2)
    features = [torch.randn(1, 256, IMAGE[0] // s, IMAGE[1] // s, generator=g).to(args.device)
                .requires_grad_() for s in STRIDES]
    rois, level = fpn_rois(512, args.device)
    ways = {'mtrain (torchvision kernels)': _mtrain_roi_align,
            'mtrain vectorised path': lambda f, r, s: _mtrain_roi_align(f, r, s, True),
            'grid_sample, 2x2 per bin': _grid_sample_roi_align}
    if args.compiled:
        ways['mmcv-full compiled'] = lambda f, r, s: _mtrain_roi_align(f, r, s, ops=args.compiled)
    for name, pool in ways.items():
        def step():
            _extract(features, rois, level, pool).sum().backward()
        rows[f'roi_align 512 RoIs, 4-level FPN, fwd+bwd: {name}'] = timed(step, args.repeats,
                                                                        args.device)


def bench_focal(args, rows: Dict[str, float]) -> None:
    g = torch.Generator().manual_seed(3)
    n = 30000 if args.quick else 120000
    logits = torch.randn(n, 80, generator=g).to(args.device).requires_grad_()
    target = torch.randint(0, 81, (n, ), generator=g).to(args.device)
    none = logits.new_zeros(0)

    class Fn(torch.autograd.Function):  # mmcv's SigmoidFocalLossFunction, reduction 'sum'
        @staticmethod
        def forward(ctx, x):
            out = torch.zeros_like(x)
            sigmoid_focal_loss_forward(x, target, none, out, 2.0, 0.25)
            ctx.save_for_backward(x)
            return out.sum()

        @staticmethod
        def backward(ctx, grad):
            x, = ctx.saved_tensors
            grad_input = torch.zeros_like(x)
            sigmoid_focal_loss_backward(x, target, none, grad_input, 2.0, 0.25)
            return grad_input * grad

    def plain():
        onehot = F.one_hot(target, 81)[:, :80].to(logits)
        p = logits.sigmoid()
        pt = (1 - p) * onehot + p * (1 - onehot)
        weight = (0.25 * onehot + 0.75 * (1 - onehot)) * pt.pow(2.0)
        (F.binary_cross_entropy_with_logits(logits, onehot, reduction='none') * weight).sum() \
            .backward()

    rows[f'sigmoid_focal_loss {n}x80 fwd+bwd: mtrain kernels'] = timed(
        lambda: Fn.apply(logits).backward(), args.repeats, args.device)
    rows[f'sigmoid_focal_loss {n}x80 fwd+bwd: mmdet py_sigmoid_focal_loss'] = timed(
        plain, args.repeats, args.device)


def bench_rest(args, rows: Dict[str, float]) -> None:
    for n in (200, 1000):
        boxes, scores = boxes_and_scores(n, 'cpu', seed=4)
        dets = boxes.new_empty(n, 5)
        for who, ops in (('mtrain', OPS), ('mmcv-full compiled', args.compiled)):
            if ops:
                rows[f'softnms {n} boxes (linear, CPU as mmcv): {who}'] = timed(
                    lambda: ops['softnms'](boxes, scores, dets, 0.3, 0.5, 1e-3, 1, 0),
                    args.repeats, 'cpu')
    boxes, scores = boxes_and_scores(2000, 'cpu', seed=5)
    dets = torch.cat([boxes, scores[:, None]], 1)
    for who, ops in (('mtrain', OPS), ('mmcv-full compiled', args.compiled)):
        if ops:
            rows[f'nms_match 2000 boxes (CPU as mmcv): {who}'] = timed(
                lambda: ops['nms_match'](dets, 0.5), args.repeats, 'cpu')
    g = torch.Generator().manual_seed(6)
    feat = torch.randn(1, 256, 50, 76, generator=g).to(args.device)
    rois, _ = fpn_rois(512, args.device)
    out = feat.new_zeros(512, 256, 7, 7)
    arg = torch.zeros(out.shape, dtype=torch.int, device=args.device)
    offset = (0.1 * torch.randn(512, 2, 7, 7, generator=g)).to(args.device)

    def pool():
        OPS['roi_pool_forward'](feat, rois, out, arg, 7, 7, 1 / 16)
        OPS['roi_pool_backward'](out, rois, arg, torch.zeros_like(feat), 7, 7, 1 / 16)

    def deform():
        OPS['deform_roi_pool_forward'](feat, rois, offset, out, 7, 7, 1 / 16, 2, 0.1)
        OPS['deform_roi_pool_backward'](out, feat, rois, offset, torch.zeros_like(feat),
                                        torch.zeros_like(offset), 7, 7, 1 / 16, 2, 0.1)
    rows['roi_pool 512 RoIs, stride 16, fwd+bwd'] = timed(pool, args.repeats, args.device)
    rows['deform_roi_pool 512 RoIs, stride 16, fwd+bwd'] = timed(deform, args.repeats,
                                                                 args.device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--device', default='cpu', choices=('cpu', 'cuda'))
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--quick', action='store_true', help='smaller sizes (a smoke run)')
    parser.add_argument('--only', nargs='*', default=['nms', 'roi_align', 'focal', 'rest', 'dcn',
                                                      'carafe', 'msda', 'rotated'])
    parser.add_argument('--compiled', action='store_true', help="add mmcv-full's kernels")
    args = parser.parse_args()
    if args.compiled:
        compiled = importlib.import_module('mmcv._ext')
        args.compiled = {name: getattr(compiled, name) for name in COMPILED_OPS}
    torch.set_num_threads(args.threads)
    rows: Dict[str, float] = {}
    benches = {'nms': bench_nms, 'roi_align': bench_roi_align, 'focal': bench_focal,
               'rest': bench_rest}
    from ops_dense import BENCHES as DENSE  # bench/ops_dense.py (it imports timed from here)
    benches.update(DENSE)
    from ops_rotated import BENCHES as ROTATED  # bench/ops_rotated.py (rotated boxes)
    benches.update(ROTATED)
    for name in args.only:
        benches[name](args, rows)
    print(f'| op, size: implementation | ms ({args.device}, {args.threads} thread(s), '
          f'median of {args.repeats}) |\n|---|---|')
    for label, ms in rows.items():
        print(f'| {label} | {ms:.2f} |')


if __name__ == '__main__':
    main()
