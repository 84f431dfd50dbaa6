"""Run in a Python with pure-Python mmcv 1.7.2: mmcv's own DCN, DCNv2, MSDA, CARAFE and
MaskedConv2d wrappers on mtrain's ``mmcv._ext`` through the route.

Prints one JSON object of measured numbers; tests/compat/ops/test_op_route_dense.py
asserts them. mmcv's own modules and Functions are used unchanged; the
route serves ``mmcv._ext`` from mtrain.compat.ops.
"""

import json

from mtrain.compat import mmcv as route

route.enable()

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.autograd import gradcheck  # noqa: E402


def dcn() -> dict:
    from mmcv.ops import DeformConv2dPack, ModulatedDeformConv2dPack
    from mmcv.ops.deform_conv import deform_conv2d
    from mmcv.ops.modulated_deform_conv import modulated_deform_conv2d
    g = torch.Generator().manual_seed(0)
    # Small (gradcheck perturbs every element), yet two groups and two deformable groups.
    x = torch.randn(1, 4, 4, 4, generator=g, dtype=torch.float64, requires_grad=True)
    off = (torch.rand(1, 2 * 2 * 4, 2, 2, generator=g, dtype=torch.float64) * 2 - 1
           ).requires_grad_()
    mask = torch.rand(1, 2 * 4, 2, 2, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(2, 2, 2, 2, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(2, generator=g, dtype=torch.float64, requires_grad=True)
    v1 = gradcheck(lambda x, o, w: deform_conv2d(x, o, w, 2, 0, 1, 2, 2, False, 1),
                   (x, off, w))
    v2 = gradcheck(lambda *a: modulated_deform_conv2d(*a, 2, 0, 1, 2, 2), (x, off, mask, w, b))
    torch.manual_seed(0)
    pack = ModulatedDeformConv2dPack(4, 8, 3, padding=1, deform_groups=2)
    torch.nn.init.normal_(pack.conv_offset.weight, std=0.1)
    out = pack(torch.randn(2, 4, 9, 9))
    out.sum().backward()
    pack1 = DeformConv2dPack(4, 8, 3, padding=1, deform_groups=2, im2col_step=1)
    out1 = pack1(torch.randn(3, 4, 9, 9))
    out1.sum().backward()
    return {'dcn_gradcheck': v1, 'mdcn_gradcheck': v2, 'mdcn_pack_shape': list(out.shape),
            'mdcn_offset_grad_nonzero': bool(pack.conv_offset.weight.grad.abs().sum() > 0),
            'dcn_pack_shape': list(out1.shape)}


def ms_deform_attn() -> dict:
    from mmcv.ops.multi_scale_deform_attn import (MultiScaleDeformableAttnFunction,
                                                  multi_scale_deformable_attn_pytorch)
    g = torch.Generator().manual_seed(0)
    shapes = torch.tensor([[6, 4], [3, 2]])
    starts = torch.tensor([0, 24])
    value = torch.rand(2, 30, 2, 4, generator=g, dtype=torch.float64, requires_grad=True)
    loc = torch.rand(2, 5, 2, 2, 3, 2, generator=g, dtype=torch.float64, requires_grad=True)
    attn = torch.rand(2, 5, 2, 2, 3, generator=g, dtype=torch.float64, requires_grad=True)
    grad = torch.rand(2, 5, 8, generator=g, dtype=torch.float64)
    ours = MultiScaleDeformableAttnFunction.apply(value, shapes, starts, loc, attn, 2)
    g_ours = torch.autograd.grad(ours, (value, loc, attn), grad)
    ref = multi_scale_deformable_attn_pytorch(value, shapes, loc, attn)
    g_ref = torch.autograd.grad(ref, (value, loc, attn), grad)
    return {'msda_forward_max_abs': float((ours - ref).abs().max()),
            'msda_grad_max_abs': max(float((a - b).abs().max()) for a, b in zip(g_ours, g_ref))}


def carafe_and_masked() -> dict:
    from mmcv.ops import CARAFE, CARAFENaive, CARAFEPack, MaskedConv2d
    g = torch.Generator().manual_seed(0)
    feat = torch.randn(2, 8, 5, 4, generator=g)
    masks = torch.rand(2, 4 * 25, 10, 8, generator=g)
    fast, naive = CARAFE(5, 4, 2)(feat, masks), CARAFENaive(5, 4, 2)(feat, masks)
    up = CARAFEPack(8, 2)(feat)
    conv = MaskedConv2d(3, 5, 3, padding=1)
    x = torch.randn(1, 3, 7, 6, generator=g)
    mask = (torch.rand(1, 7, 6, generator=g) > 0.4).float()
    with torch.no_grad():
        masked, full = conv(x, mask), F.conv2d(x, conv.weight, conv.bias, padding=1) * mask
    return {'carafe_equals_naive': bool(torch.equal(fast, naive)),
            'carafe_pack_shape': list(up.shape),
            'masked_conv_max_abs': float((masked - full).abs().max())}


if __name__ == '__main__':
    result = {**dcn(), **ms_deform_attn(), **carafe_and_masked()}
    from mtrain.compat.ops import ext
    result['served'] = ext.report()
    print(json.dumps(result))
