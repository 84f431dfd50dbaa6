"""mtrain's ``mmcv._ext`` against mmcv-full 1.7.2's compiled CPU kernels, via mmcv's wrappers.

Run in the venv bench/build_mmcv_full_cpu.sh makes (mmcv-full with its
compiled ``mmcv._ext``), with this repository on the path::

    PYTHONPATH=. /work/venv-mmcv-full/bin/python bench/compare_ops_compiled.py [--time]

Each case calls mmcv's own Python wrapper (``mmcv.ops.nms``,
``RoIAlignFunction``, ``DeformConv2dFunction``, ...) twice on the same random
inputs: once with the wrapper module's ``ext_module`` the compiled one, once
mtrain's (:class:`mtrain.compat.ops.ext.ExtModule`, what the import route
serves). It prints one markdown row per compared tensor: bitwise equal or
not, the largest absolute and relative difference, and the tolerance the case
holds to (bitwise where the algorithm is the same; exit status 1 if a case
breaks its tolerance). Only ops that mmcv-full 1.7.2 has a CPU kernel for
*and* mtrain implements are compared; the other CPU kernels are listed.
``--time`` adds the CPU time of a few detector-sized calls on each backend.
"""

import contextlib
import importlib
import statistics
import sys
import time
from typing import Callable, Dict, Iterator, List, Sequence

import torch

import mmcv._ext as compiled
from mtrain.compat.ops import entry_points
from mtrain.compat.ops.ext import ExtModule

OURS = ExtModule('mmcv._ext')
WRAPPERS = ('mmcv.ops.nms', 'mmcv.ops.roi_align', 'mmcv.ops.deform_conv',
            'mmcv.ops.modulated_deform_conv', 'mmcv.ops.box_iou_rotated',
            'mmcv.ops.roi_align_rotated')
ROWS: List[str] = []
FAILED: List[str] = []


@contextlib.contextmanager
def backend(ext) -> Iterator[None]:
    """mmcv's wrapper modules call ``ext`` inside the block."""
    modules = [importlib.import_module(m) for m in WRAPPERS]
    saved = [m.ext_module for m in modules]
    for m in modules:
        m.ext_module = ext
    try:
        yield
    finally:
        for m, e in zip(modules, saved):
            m.ext_module = e


def both(fn: Callable) -> tuple:
    """``fn()`` with the compiled kernels, then with mtrain's."""
    with backend(compiled):
        ref = fn()
    with backend(OURS):
        got = fn()
    return ref, got


def record(case: str, names: Sequence[str], ref: Sequence, got: Sequence, tol: float,
           why: str = '') -> None:
    """One row per tensor; ``tol`` 0 means bitwise."""
    for name, r, g in zip(names, ref, got):
        r, g = torch.as_tensor(r), torch.as_tensor(g)
        same_shape = r.shape == g.shape
        bitwise = same_shape and torch.equal(r, g)
        if same_shape and r.is_floating_point() and r.numel():
            diff = (r.double() - g.double()).abs()
            abs_err = float(diff.max())
            rel_err = float((diff / r.double().abs().clamp_min(1e-12)).max())
        else:
            abs_err = rel_err = 0.0 if bitwise else float('inf')
        ok = bitwise or (same_shape and abs_err <= tol)
        want = 'bitwise' if tol == 0 else f'abs <= {tol:g}'
        ROWS.append(f'| {case} | {name} | {"yes" if bitwise else "no"} | {abs_err:.3g} | '
                    f'{rel_err:.3g} | {want} | {"ok" if ok else "FAIL"} | {why} |')
        if not ok:
            FAILED.append(f'{case} {name}')


def nms_cases(gen: torch.Generator) -> None:
    from mmcv.ops import nms, nms_match, soft_nms
    xy = torch.rand(3000, 2, generator=gen) * 200
    boxes = torch.cat([xy, xy + torch.rand(3000, 2, generator=gen) * 60 + 1], 1)
    scores = (torch.rand(3000, generator=gen) * 20).round() / 20  # many ties
    for offset in (0, 1):
        ref, got = both(lambda: nms(boxes, scores, 0.5, offset=offset))
        record(f'nms 3000 boxes, tied scores, offset={offset}', ['dets', 'inds'], ref, got, 0)
    for method in ('linear', 'gaussian', 'naive'):
        ref, got = both(lambda: soft_nms(boxes[:500], scores[:500], 0.3, 0.5, 1e-3, method))
        # gaussian: mmcv's kernel calls glibc's expf, which is not correctly rounded; mtrain
        # rounds exp taken in float64, so a re-weighted score may differ in its last bit.
        tol, why = (6e-8, "last bit of glibc's expf") if method == 'gaussian' else (0, '')
        record(f'soft_nms 500 boxes, {method}', ['dets'], ref[:1], got[:1], tol, why)
        record(f'soft_nms 500 boxes, {method}', ['inds'], ref[1:], got[1:], 0)
    dets = torch.cat([boxes[:800], scores[:800, None]], 1)
    ref, got = both(lambda: nms_match(dets, 0.5))
    same = len(ref) == len(got) and all(torch.equal(a, b) for a, b in zip(ref, got))
    record('nms_match 800 boxes', ['groups'], [torch.tensor(same)], [torch.tensor(True)], 0)


def forward_backward(fn: Callable, feat: torch.Tensor, grad: torch.Tensor, dtype) -> tuple:
    """``fn(x)`` on a fresh leaf ``x`` (``feat`` as ``dtype``) and ``x``'s gradient."""
    x = feat.to(dtype).detach().clone().requires_grad_()
    out = fn(x)
    out.backward(grad.to(dtype))
    return out.detach(), x.grad


def roi_align_cases(gen: torch.Generator) -> None:
    from mmcv.ops.roi_align import roi_align
    feat = torch.randn(2, 16, 40, 48, generator=gen, dtype=torch.float64)
    xy = torch.rand(256, 2, generator=gen, dtype=torch.float64) * 300
    rois = torch.cat([torch.randint(0, 2, (256, 1), generator=gen).double(), xy,
                      xy + torch.rand(256, 2, generator=gen, dtype=torch.float64) * 120], 1)
    grad = torch.randn(256, 16, 7, 7, generator=gen, dtype=torch.float64)
    for dtype in (torch.float64, torch.float32):
        for aligned, ratio, mode in ((True, 0, 'avg'), (False, 2, 'avg'), (True, 2, 'max')):
            ref, got = both(lambda: forward_backward(
                lambda x: roi_align(x, rois.to(dtype), 7, 0.125, ratio, mode, aligned), feat,
                grad, dtype))
            record(f'roi_align {str(dtype)[6:]} aligned={aligned} ratio={ratio} {mode}',
                   ['output', 'grad_input'], ref, got, 0)


def _rotated_boxes(gen: torch.Generator, n: int) -> torch.Tensor:
    """(n, 5) boxes, a quarter of them axis-aligned (parallel edges) and some repeated."""
    boxes = torch.cat([torch.rand(n, 2, generator=gen) * 60, torch.rand(n, 2, generator=gen) * 30
                       + 1, (torch.rand(n, 1, generator=gen) - 0.5) * 4], 1)
    boxes[::4, 4] = torch.pi / 2 * torch.randint(-1, 2, (len(boxes[::4]), ), generator=gen)
    boxes[1::7] = boxes[0::7][:len(boxes[1::7])]
    return boxes


def rotated_cases(gen: torch.Generator) -> None:
    from mmcv.ops import box_iou_rotated, nms_rotated
    a, b = _rotated_boxes(gen, 300), _rotated_boxes(gen, 200)
    why = 'hull by angle sort, not Graham scan: fan sums differ in the last bits'
    for mode in ('iou', 'iof'):
        for aligned in (False, True):
            ref, got = both(lambda: box_iou_rotated(a, b if not aligned else a.flip(0), mode,
                                                    aligned))
            record(f'box_iou_rotated 300x200 {mode} aligned={aligned}', ['ious'], [ref], [got],
                   2e-6, why)
    scores = (torch.rand(300, generator=gen) * 20).round() / 20
    labels = torch.randint(0, 3, (300, ), generator=gen)
    for lab in (None, labels):
        ref, got = both(lambda: nms_rotated(a, scores, 0.3, lab))
        record(f'nms_rotated 300 boxes, tied scores, labels={lab is not None}', ['dets', 'inds'],
               ref, got, 0)


def roi_align_rotated_cases(gen: torch.Generator) -> None:
    from mmcv.ops import roi_align_rotated
    feat = torch.randn(2, 8, 30, 36, generator=gen, dtype=torch.float64)
    rois = torch.cat([torch.randint(0, 2, (128, 1), generator=gen).double(),
                      torch.rand(128, 2, generator=gen, dtype=torch.float64) * 300,
                      torch.rand(128, 2, generator=gen, dtype=torch.float64) * 100 + 2,
                      (torch.rand(128, 1, generator=gen, dtype=torch.float64) - 0.5) * 6], 1)
    grad = torch.randn(128, 8, 7, 7, generator=gen, dtype=torch.float64)
    for dtype in (torch.float64, torch.float32):
        for aligned, ratio, clockwise in ((True, 2, False), (False, 2, True), (True, 0, True)):
            ref, got = both(lambda: forward_backward(
                lambda x: roi_align_rotated(x, rois.to(dtype), 7, 0.125, ratio, aligned,
                                            clockwise), feat, grad, dtype))
            record(f'roi_align_rotated {str(dtype)[6:]} aligned={aligned} ratio={ratio} '
                   f'clockwise={clockwise}', ['output', 'grad_input'], ref, got, 0)


def _dcn_inputs(gen, dtype, n=2, c=8, hw=17, o=16, k=3, stride=1, groups=2, dg=2):
    oh = (hw + 2 - k) // stride + 1
    x = torch.randn(n, c, hw, hw, generator=gen, dtype=torch.float64).to(dtype)
    offset = (torch.randn(n, 2 * dg * k * k, oh, oh, generator=gen, dtype=torch.float64)
              * 2).to(dtype)
    mask = torch.rand(n, dg * k * k, oh, oh, generator=gen, dtype=torch.float64).to(dtype)
    weight = torch.randn(o, c // groups, k, k, generator=gen, dtype=torch.float64).to(dtype)
    bias = torch.randn(o, generator=gen, dtype=torch.float64).to(dtype)
    grad = torch.randn(n, o, oh, oh, generator=gen, dtype=torch.float64).to(dtype)
    return x, offset, mask, weight, bias, grad


def dcn_cases(gen: torch.Generator) -> None:
    from mmcv.ops.deform_conv import deform_conv2d
    from mmcv.ops.modulated_deform_conv import modulated_deform_conv2d
    for dtype, tol in ((torch.float64, 1e-11), (torch.float32, 2e-4)):
        for stride, groups, dg in ((1, 1, 1), (2, 2, 2)):
            x, off, mask, w, b, grad = _dcn_inputs(gen, dtype, stride=stride, groups=groups,
                                                   dg=dg)
            name = f'{str(dtype)[6:]} stride={stride} groups={groups} dg={dg}'
            why = ('same bilinear rule, products summed in another order '
                   '(mmcv: im2col + addmm per group; torchvision: its own im2col + matmul)')

            def run_v1():
                t = [v.clone().requires_grad_() for v in (x, off, w)]
                out = deform_conv2d(t[0], t[1], t[2], stride, 1, 1, groups, dg, False, 2)
                out.backward(grad)
                return [out.detach()] + [v.grad for v in t]

            def run_v2():
                t = [v.clone().requires_grad_() for v in (x, off, mask, w, b)]
                out = modulated_deform_conv2d(*t, stride, 1, 1, groups, dg)
                out.backward(grad)
                return [out.detach()] + [v.grad for v in t]
            ref, got = both(run_v1)
            record(f'deform_conv {name}', ['output', 'grad_input', 'grad_offset',
                                           'grad_weight'], ref, got, tol, why)
            ref, got = both(run_v2)
            record(f'modulated_deform_conv {name}', ['output', 'grad_input', 'grad_offset',
                                                     'grad_mask', 'grad_weight', 'grad_bias'],
                   ref, got, tol, why)


def timing_rows(repeats: int = 3) -> List[str]:
    """CPU seconds (``time.process_time``: the 2 cores are shared) of the same wrapper call on
    each backend, one thread, median of ``repeats`` after a warm-up."""
    from mmcv.ops import nms
    from mmcv.ops.modulated_deform_conv import modulated_deform_conv2d
    from mmcv.ops.roi_align import roi_align
    gen = torch.Generator().manual_seed(1)
    x, off, mask, w, b, grad = _dcn_inputs(gen, torch.float32, n=2, c=256, hw=50, o=256,
                                           groups=1, dg=1)
    off = off * 0.5
    feat = torch.randn(1, 256, 50, 76, generator=gen, requires_grad=True)
    xy = torch.rand(512, 2, generator=gen) * 700
    rois = torch.cat([torch.zeros(512, 1), xy, xy + torch.rand(512, 2, generator=gen) * 300], 1)
    boxes = torch.cat([xy, xy + 16 + torch.rand(512, 2, generator=gen) * 200], 1).repeat(10, 1)
    boxes = boxes + torch.rand(boxes.shape, generator=gen)
    scores = torch.rand(5120, generator=gen)

    def dcnv2():
        t = [v.clone().requires_grad_() for v in (x, off, mask, w, b)]
        modulated_deform_conv2d(*t, 1, 1, 1, 1, 1).backward(grad)

    def align():
        roi_align(feat, rois, 7, 1 / 16, 0, 'avg', True).sum().backward()
    cases = {'DCNv2 3x3 2x256x50x50 fwd+bwd': dcnv2,
             'roi_align 512 RoIs stride 16 fwd+bwd': align,
             'nms 5120 boxes': lambda: nms(boxes, scores, 0.7)}
    rows = []
    for name, fn in cases.items():
        secs = []
        for ext in (compiled, OURS):
            with backend(ext):
                fn()
                times = []
                for _ in range(repeats):
                    start = time.process_time()
                    fn()
                    times.append(time.process_time() - start)
            secs.append(statistics.median(times) * 1e3)
        rows.append(f'| {name} | {secs[0]:.1f} | {secs[1]:.1f} | {secs[1] / secs[0]:.2f} |')
    return rows


def uncompared() -> List[str]:
    """pybind names of the compiled module that mtrain does not implement (some CUDA-only)."""
    ours = set(entry_points())
    return sorted(n for n in dir(compiled) if not n.startswith('_') and n not in ours
                  and n not in ('get_compiler_version', 'get_compiling_cuda_version'))


#: Each group of cases and the entry points it needs from mtrain.
CASES = ((nms_cases, ('nms', 'softnms', 'nms_match')),
         (roi_align_cases, ('roi_align_forward', 'roi_align_backward')),
         (dcn_cases, ('deform_conv_forward', 'modulated_deform_conv_forward')),
         (rotated_cases, ('box_iou_rotated', 'nms_rotated')),
         (roi_align_rotated_cases, ('roi_align_rotated_forward', 'roi_align_rotated_backward')))


def main() -> int:
    torch.set_num_threads(1)  # same threading for both; 2 shared cores
    for cases, needs in CASES:
        missing = [n for n in needs if n not in entry_points()]
        if missing:
            ROWS.append(f'| {cases.__name__} | - | - | - | - | - | skipped | mtrain does not '
                        f'implement {", ".join(missing)} yet |')
            continue
        cases(torch.Generator().manual_seed(0))
    print('| case | tensor | bitwise | max abs diff | max rel diff | tolerance | result | why |')
    print('|---|---|---|---|---|---|---|---|')
    print('\n'.join(ROWS))
    print(f'\nmmcv._ext names mtrain does not implement (only some have a CPU kernel): '
          f'{", ".join(uncompared())}')
    print('FAILED: ' + ', '.join(FAILED) if FAILED else 'all cases within tolerance')
    if '--time' in sys.argv:
        print('\n| op, size | mmcv-full CPU ms | mtrain ms | ratio |\n|---|---|---|---|')
        print('\n'.join(timing_rows()))
    return 1 if FAILED else 0


if __name__ == '__main__':
    sys.exit(main())
