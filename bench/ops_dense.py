"""Benchmarks of mtrain's dense-map ``mmcv._ext`` ops (DCN, DCNv2, CARAFE, ms_deform_attn).

Run through bench/ops.py: ``PYTHONPATH=. python bench/ops.py --only dcn carafe msda
[--device cuda] [--quick]``. Each row is the
median ms of forward + backward, mtrain's entry points in mmcv's call shape
against the obvious pure-PyTorch formulation through autograd:

- ``DCNv2`` (``modulated_deform_conv``) on ResNet-50 stage 3's 3x3 conv
  (256 -> 256 channels on a stride-16 map of an 800x1216 image, 50x76, batch
  2, one deformable group, as mmdet's ``dcn=dict(type='DCNv2')`` configs) and
  ``DCN`` (``deform_conv``) on the same: torchvision's kernels against
  ``grid_sample`` of all 9 kernel points in one call, times the mask, then one
  matmul with the weight (im2col by hand);
- ``carafe`` (CARAFE's FPN upsampler: 256 channels, 50x76 -> 100x152,
  kernel 5, group 1): mtrain's k*k multiply-adds against ``F.unfold`` +
  nearest upsampling + a weighted sum;
- ``ms_deform_attn`` (Deformable DETR's encoder: 2 images, 4 levels from
  100x152, 8 heads x 32 dims, 4 points): mtrain's entry points (one
  ``grid_sample`` per level, an einsum) only; mmcv's own pure-PyTorch reference
  is the same formulation.
"""

from typing import Dict

import torch
import torch.nn.functional as F

from mtrain.compat.ops import carafe, entry_points, ms_deform_attn
from ops import timed as _timed  # bench/ops.py: one timing rule for every row

OPS = entry_points()


def dcn_by_grid_sample(x, offset, mask, weight, bias, pad):
    """The obvious DCNv2 (stride 1, one deformable group): sample, modulate, matmul."""
    n, c, h, w = x.shape
    o, _, k, _ = weight.shape
    oh, ow = offset.shape[2:]
    ky, kx = torch.meshgrid(torch.arange(k, device=x.device), torch.arange(k, device=x.device),
                            indexing='ij')
    base_y = torch.arange(oh, device=x.device).view(1, oh, 1) - pad + ky.reshape(-1, 1, 1)
    base_x = torch.arange(ow, device=x.device).view(1, 1, ow) - pad + kx.reshape(-1, 1, 1)
    off = offset.view(n, k * k, 2, oh, ow)
    py, px = base_y + off[:, :, 0], base_x + off[:, :, 1]  # n, k*k, oh, ow
    grid = torch.stack([px / (w - 1) * 2 - 1, py / (h - 1) * 2 - 1], -1)
    cols = F.grid_sample(x, grid.view(n, k * k * oh, ow, 2), align_corners=True)
    cols = cols.view(n, c, k * k, oh * ow)
    if mask is not None:
        cols = cols * mask.view(n, 1, k * k, oh * ow)
    out = torch.matmul(weight.view(o, c * k * k), cols.view(n, c * k * k, oh * ow))
    out = out.view(n, o, oh, ow)
    return out if bias is None else out + bias.view(1, -1, 1, 1)


def bench_dcn(args, rows: Dict[str, float]) -> None:
    g = torch.Generator().manual_seed(7)
    n, c, h, w = (1, 256, 25, 38) if args.quick else (2, 256, 50, 76)
    dev = args.device
    x = torch.randn(n, c, h, w, generator=g).to(dev).requires_grad_()
    offset = torch.randn(n, 18, h, w, generator=g).to(dev).requires_grad_()
    mask = torch.rand(n, 9, h, w, generator=g).to(dev).requires_grad_()
    weight = (torch.randn(c, c, 3, 3, generator=g) * 0.02).to(dev).requires_grad_()
    bias = torch.zeros(c, device=dev, requires_grad=True)
    size = f'{n}x{c}x{h}x{w}'
    mdcn = dict(kernel_h=3, kernel_w=3, stride_h=1, stride_w=1, pad_h=1, pad_w=1, dilation_h=1,
                dilation_w=1, group=1, deformable_group=1, with_bias=True)
    dcn = dict(kW=3, kH=3, dW=1, dH=1, padW=1, padH=1, dilationW=1, dilationH=1, group=1,
               deformable_group=1, im2col_step=n)

    def ours_v2():  # mmcv's ModulatedDeformConv2dFunction: forward, then its one backward
        t = [v.detach() for v in (x, weight, bias, offset, mask)]
        out, cols, ones = t[0].new_empty(n, c, h, w), t[0].new_empty(0), t[0].new_empty(0)
        OPS['modulated_deform_conv_forward'](t[0], t[1], t[2], ones, t[3], t[4], out, cols,
                                             **mdcn)
        grads = [torch.zeros_like(v) for v in (t[0], t[1], t[2], t[3], t[4])]
        OPS['modulated_deform_conv_backward'](t[0], t[1], t[2], ones, t[3], t[4], cols,
                                              *grads, torch.ones_like(out), **mdcn)

    def ours_v1():  # mmcv's DeformConv2dFunction: forward, backward_input, backward_parameters
        t = [v.detach() for v in (x, weight, offset)]
        out, cols, ones = t[0].new_empty(n, c, h, w), t[0].new_empty(0), t[0].new_empty(0)
        OPS['deform_conv_forward'](t[0], t[1], t[2], out, cols, ones, **dcn)
        go = torch.ones_like(out)
        OPS['deform_conv_backward_input'](t[0], t[2], go, torch.zeros_like(t[0]),
                                          torch.zeros_like(t[2]), t[1], cols, **dcn)
        OPS['deform_conv_backward_parameters'](t[0], t[2], go, torch.zeros_like(t[1]), cols,
                                               ones, scale=1.0, **dcn)

    def plain(with_mask):
        dcn_by_grid_sample(x, offset, mask if with_mask else None, weight,
                           bias if with_mask else None, 1).sum().backward()
    rows[f'DCNv2 3x3 {size} fwd+bwd: mtrain'] = _timed(ours_v2, args.repeats, dev)
    rows[f'DCNv2 3x3 {size} fwd+bwd: grid_sample + matmul'] = _timed(
        lambda: plain(True), args.repeats, dev)
    rows[f'DCN 3x3 {size} fwd+bwd: mtrain'] = _timed(ours_v1, args.repeats, dev)
    rows[f'DCN 3x3 {size} fwd+bwd: grid_sample + matmul'] = _timed(
        lambda: plain(False), args.repeats, dev)


def carafe_by_unfold(feat, masks, k, s):
    """The obvious CARAFE (group 1): unfold k x k patches, upsample them, weight by the mask."""
    n, c, h, w = feat.shape
    patches = F.unfold(feat, k, padding=(k - 1) // 2).view(n, c * k * k, h, w)
    patches = F.interpolate(patches, scale_factor=s, mode='nearest')
    return (patches.view(n, c, k * k, h * s, w * s) * masks.unsqueeze(1)).sum(2)


def bench_carafe(args, rows: Dict[str, float]) -> None:
    g = torch.Generator().manual_seed(8)
    n, c, h, w = (1, 64, 25, 38) if args.quick else (2, 256, 50, 76)
    feat = torch.randn(n, c, h, w, generator=g).to(args.device).requires_grad_()
    masks = torch.rand(n, 25, 2 * h, 2 * w, generator=g).to(args.device).requires_grad_()

    def ours():
        out = carafe.carafe(feat.detach(), masks.detach(), 5, 1, 2)
        carafe.carafe_grads(torch.ones_like(out), feat.detach(), masks.detach(), 5, 1, 2)
    rows[f'carafe k5 x2 {n}x{c}x{h}x{w} fwd+bwd: mtrain'] = _timed(ours, args.repeats,
                                                                   args.device)
    rows[f'carafe k5 x2 {n}x{c}x{h}x{w} fwd+bwd: unfold + upsample'] = _timed(
        lambda: carafe_by_unfold(feat, masks, 5, 2).sum().backward(), args.repeats, args.device)


def bench_msda(args, rows: Dict[str, float]) -> None:
    g = torch.Generator().manual_seed(9)
    sizes = [(50, 76), (25, 38), (13, 19), (7, 10)] if args.quick else \
        [(100, 152), (50, 76), (25, 38), (13, 19)]
    shapes = torch.tensor(sizes, device=args.device)
    starts = torch.cat([shapes.new_zeros(1), shapes.prod(1).cumsum(0)[:-1]])
    keys = int(shapes.prod(1).sum())
    value = torch.randn(2, keys, 8, 32, generator=g).to(args.device)
    loc = torch.rand(2, keys, 8, 4, 4, 2, generator=g).to(args.device)
    attn = torch.rand(2, keys, 8, 4, 4, generator=g).to(args.device)

    def ours():
        out = ms_deform_attn.ms_deform_attn_forward(value, shapes, starts, loc, attn, 64)
        grads = [torch.zeros_like(t) for t in (value, loc, attn)]
        ms_deform_attn.ms_deform_attn_backward(value, shapes, starts, loc, attn,
                                               torch.ones_like(out), *grads, 64)
    rows[f'ms_deform_attn encoder {keys} queries fwd+bwd: mtrain'] = _timed(
        ours, args.repeats, args.device)


BENCHES = {'dcn': bench_dcn, 'carafe': bench_carafe, 'msda': bench_msda}

