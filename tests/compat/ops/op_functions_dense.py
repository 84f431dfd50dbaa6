"""Autograd wrappers that call mtrain's ``mmcv._ext`` entry points the way mmcv 1.7.2's wrappers do.

mtrain's venv has no mmcv, so these stand in for ``mmcv/ops/*.py`` in the
unit tests: same entry points, same keyword names, same in-place output and
zero-filled gradient buffers. mmcv's own wrappers are exercised through the
import route by mmcv's own tests (docs/migration.md, "Detection codebases").
"""

import torch
from torch.autograd import Function

from mtrain.compat.ops import carafe
from mtrain.compat.ops import deform_conv as dc
from mtrain.compat.ops import modulated_deform_conv as mdc
from mtrain.compat.ops import ms_deform_attn as msda
from mtrain.compat.ops import sync_bn


def dcn_kwargs(weight, cfg):
    s, p, d = cfg['stride'], cfg['pad'], cfg['dil']
    return dict(kW=weight.size(3), kH=weight.size(2), dW=s, dH=s, padW=p, padH=p,
                dilationW=d, dilationH=d, group=cfg['groups'],
                deformable_group=cfg['dg'], im2col_step=1)


def mdcn_kwargs(weight, cfg, with_bias):
    s, p, d = cfg['stride'], cfg['pad'], cfg['dil']
    return dict(kernel_h=weight.size(2), kernel_w=weight.size(3), stride_h=s, stride_w=s,
                pad_h=p, pad_w=p, dilation_h=d, dilation_w=d, group=cfg['groups'],
                deformable_group=cfg['dg'], with_bias=with_bias)


def _out_shape(x, weight, cfg):
    k = cfg['dil'] * (weight.size(2) - 1) + 1
    size = [(s + 2 * cfg['pad'] - k) // cfg['stride'] + 1 for s in x.shape[2:]]
    return (x.size(0), weight.size(0), *size)


class _DeformConv(Function):
    @staticmethod
    def forward(ctx, x, offset, weight, cfg):
        ctx.cfg, ctx.bufs = cfg, [x.new_empty(0), x.new_empty(0)]
        ctx.save_for_backward(x, offset, weight)
        out = x.new_empty(_out_shape(x, weight, cfg))
        dc.deform_conv_forward(x, weight, offset, out, *ctx.bufs, **dcn_kwargs(weight, cfg))
        return out

    @staticmethod
    def backward(ctx, go):
        x, offset, weight = ctx.saved_tensors
        go = go.contiguous()
        kw = dcn_kwargs(weight, ctx.cfg)
        gx, goff, gw = torch.zeros_like(x), torch.zeros_like(offset), torch.zeros_like(weight)
        dc.deform_conv_backward_input(x, offset, go, gx, goff, weight, ctx.bufs[0], **kw)
        dc.deform_conv_backward_parameters(x, offset, go, gw, *ctx.bufs, scale=1, **kw)
        return gx, goff, gw, None


class _ModulatedDeformConv(Function):
    @staticmethod
    def forward(ctx, x, offset, mask, weight, bias, cfg):
        ctx.cfg, ctx.bufs = cfg, [x.new_empty(0), x.new_empty(0)]
        ctx.with_bias = bias is not None
        bias = bias if ctx.with_bias else x.new_empty(0)
        ctx.save_for_backward(x, offset, mask, weight, bias)
        out = x.new_empty(_out_shape(x, weight, cfg))
        mdc.modulated_deform_conv_forward(x, weight, bias, ctx.bufs[0], offset, mask, out,
                                          ctx.bufs[1], **mdcn_kwargs(weight, cfg, ctx.with_bias))
        return out

    @staticmethod
    def backward(ctx, go):
        x, offset, mask, weight, bias = ctx.saved_tensors
        grads = [torch.zeros_like(t) for t in (x, weight, bias, offset, mask)]
        mdc.modulated_deform_conv_backward(
            x, weight, bias, ctx.bufs[0], offset, mask, ctx.bufs[1], *grads, go.contiguous(),
            **mdcn_kwargs(weight, ctx.cfg, ctx.with_bias))
        gx, gw, gb, goff, gm = grads
        return gx, goff, gm, gw, gb if ctx.with_bias else None, None


def deform_conv(x, offset, weight, cfg):
    return _DeformConv.apply(x, offset, weight, cfg)


def modulated_deform_conv(x, offset, mask, weight, bias, cfg):
    return _ModulatedDeformConv.apply(x, offset, mask, weight, bias, cfg)


class _MSDeformAttn(Function):
    @staticmethod
    def forward(ctx, value, shapes, starts, loc, weight):
        ctx.save_for_backward(value, shapes, starts, loc, weight)
        return msda.ms_deform_attn_forward(value, shapes, starts, loc, weight, im2col_step=64)

    @staticmethod
    def backward(ctx, go):
        value, shapes, starts, loc, weight = ctx.saved_tensors
        grads = [torch.zeros_like(t) for t in (value, loc, weight)]
        msda.ms_deform_attn_backward(value, shapes, starts, loc, weight, go.contiguous(),
                                     *grads, im2col_step=64)
        return grads[0], None, None, grads[1], grads[2]


class _Carafe(Function):
    """``naive=True``: mmcv's CARAFENaive entry points; else CARAFE's (with NHWC buffers)."""

    @staticmethod
    def forward(ctx, feat, masks, k, g, s, naive):
        ctx.args, ctx.naive = dict(kernel_size=k, group_size=g, scale_factor=s), naive
        n, c, h, w = feat.shape
        out = feat.new_zeros(n, c, h * s, w * s)
        if naive:
            carafe.carafe_naive_forward(feat, masks, out, **ctx.args)
            ctx.save_for_backward(feat, masks)
        else:
            rfeat = torch.zeros_like(feat)
            carafe.carafe_forward(feat, masks, rfeat, torch.zeros_like(out),
                                  torch.zeros_like(masks), out, **ctx.args)
            ctx.save_for_backward(rfeat, masks)
        return out

    @staticmethod
    def backward(ctx, go):
        feat_or_rfeat, masks = ctx.saved_tensors
        gf, gm = torch.zeros_like(feat_or_rfeat), torch.zeros_like(masks)
        go = go.contiguous()
        if ctx.naive:
            carafe.carafe_naive_backward(go, feat_or_rfeat, masks, gf, gm, **ctx.args)
        else:
            scratch = [torch.zeros_like(go), torch.zeros_like(go), torch.zeros_like(gf),
                       torch.zeros_like(gm)]
            carafe.carafe_backward(go, feat_or_rfeat, masks, *scratch, gf, gm, **ctx.args)
        return gf, gm, None, None, None, None


def ms_deform_attn(value, shapes, starts, loc, weight):
    return _MSDeformAttn.apply(value, shapes, starts, loc, weight)


def carafe_op(feat, masks, k, g, s, naive=False):
    return _Carafe.apply(feat, masks, k, g, s, naive)


class _SyncBN(Function):
    """mmcv's SyncBatchNormFunction call sequence (stats_mode 'default'), buffers in ``stat``."""

    @staticmethod
    def forward(ctx, x, running_mean, running_var, weight, bias, momentum, eps, stat):
        x3 = x.flatten(2)
        out = torch.zeros_like(x)
        c, ranks = x3.size(1), _world()
        mean, var, std = (torch.zeros(c, dtype=stat) for _ in range(3))
        norm = torch.zeros_like(x3, dtype=stat)
        sync_bn.sync_bn_forward_mean(x3, mean)
        _all_reduce(mean, ranks)
        sync_bn.sync_bn_forward_var(x3, mean, var)
        _all_reduce(var, ranks)
        sync_bn.sync_bn_forward_output(x3, mean, var, weight, bias, running_mean, running_var,
                                       norm, std, out.view_as(x3), eps=eps,
                                       momentum=torch.tensor([momentum]), group_size=ranks)
        ctx.save_for_backward(norm, std, weight)
        return out

    @staticmethod
    def backward(ctx, go):
        norm, std, weight = ctx.saved_tensors
        gw, gb, gx = torch.zeros_like(weight), torch.zeros_like(weight), torch.zeros_like(go)
        go3 = go.flatten(2)
        sync_bn.sync_bn_backward_param(go3, norm, gw, gb)
        _all_reduce(gw, _world())
        _all_reduce(gb, _world())
        sync_bn.sync_bn_backward_data(go3, weight, gw, gb, norm, std, gx.view_as(go3))
        return gx, None, None, gw, gb, None, None, None


def _world():
    dist = torch.distributed
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def _all_reduce(t, ranks):
    """Sum then mean over the ranks, as mmcv's wrapper does in stats_mode 'default'."""
    if ranks > 1:
        torch.distributed.all_reduce(t)
        t /= ranks


def sync_bn_op(x, running_mean, running_var, weight, bias, momentum=0.1, eps=1e-5,
               stat=torch.float32):
    return _SyncBN.apply(x, running_mean, running_var, weight, bias, momentum, eps, stat)
