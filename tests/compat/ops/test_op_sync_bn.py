"""sync_bn_* entry points in mmcv's SyncBatchNormFunction sequence: plain batch norm on one
process, the whole batch's batch norm across two gloo processes."""

import os
import socket

import pytest
import torch
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.autograd import gradcheck

import op_functions_dense  # tests/compat/ops/op_functions_dense.py


def _data(dtype=torch.float32, n=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, 2, 5, generator=g, dtype=dtype) * 2 + 1
    weight = torch.randn(3, generator=g, dtype=dtype)
    bias = torch.randn(3, generator=g, dtype=dtype)
    grad = torch.randn(n, 3, 2, 5, generator=g, dtype=dtype)
    return x, weight, bias, grad


def _bn_reference(x, weight, bias, grad):
    """torch's batch norm in training mode: output, running stats, gradients."""
    x, weight, bias = (t.clone().requires_grad_() for t in (x, weight, bias))
    rm, rv = torch.zeros(3, dtype=x.dtype), torch.ones(3, dtype=x.dtype)
    out = F.batch_norm(x, rm, rv, weight, bias, training=True, momentum=0.1, eps=1e-5)
    out.backward(grad)
    return out.detach(), rm, rv, x.grad, weight.grad, bias.grad


def _ours(x, weight, bias, grad, stat=torch.float32):
    x, weight, bias = (t.clone().requires_grad_() for t in (x, weight, bias))
    rm, rv = torch.zeros(3, dtype=stat), torch.ones(3, dtype=stat)
    out = op_functions_dense.sync_bn_op(x, rm, rv, weight, bias, stat=stat)
    out.backward(grad)
    return out.detach(), rm, rv, x.grad, weight.grad, bias.grad


def test_one_process_is_plain_batch_norm():
    data = _data()
    for got, want in zip(_ours(*data), _bn_reference(*data)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_gradcheck_float64():
    x, weight, bias, _ = _data(torch.float64, n=2)
    args = [t.requires_grad_() for t in (x, weight, bias)]
    assert gradcheck(lambda a, w, b: op_functions_dense.sync_bn_op(
        a, torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64), w, b,
        stat=torch.float64), args)


def test_half_input_float_statistics():
    x, weight, bias, grad = _data()
    out16 = _ours(x.half(), weight, bias, grad.half())
    want = _bn_reference(x, weight, bias, grad)
    assert out16[0].dtype == torch.float16 and out16[1].dtype == torch.float32
    torch.testing.assert_close(out16[0].float(), want[0], rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(out16[1], want[1], rtol=1e-3, atol=1e-3)


def _rank(rank, port, queue):
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
    torch.distributed.init_process_group('gloo', rank=rank, world_size=2)
    x, weight, bias, grad = _data(n=8)
    half = slice(4 * rank, 4 * rank + 4)
    got = _ours(x[half], weight, bias, grad[half])
    queue.put((rank, [t.clone() for t in got]))
    torch.distributed.destroy_process_group()


@pytest.mark.slow
def test_two_processes_normalise_over_the_whole_batch():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    ctx = mp.get_context('spawn')
    queue = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(r, port, queue)) for r in range(2)]
    for p in procs:
        p.start()
    results = dict(queue.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(60)
    x, weight, bias, grad = _data(n=8)
    out, rm, rv, gx, gw, gb = _bn_reference(x, weight, bias, grad)
    for rank in (0, 1):
        r_out, r_rm, r_rv, r_gx, r_gw, r_gb = results[rank]
        half = slice(4 * rank, 4 * rank + 4)
        torch.testing.assert_close(r_out, out[half], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(r_gx, gx[half], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close((r_rm, r_rv), (rm, rv), rtol=1e-5, atol=1e-5)
        # mmcv's wrapper returns the rank-averaged parameter gradients (DDP averages too).
        torch.testing.assert_close((r_gw, r_gb), (gw / 2, gb / 2), rtol=1e-5, atol=1e-5)


def test_empty_batch_leaves_running_statistics():
    """mmcv's wrapper skips mean/var on an empty batch and passes momentum 0 when every rank's
    batch was empty; the output pass must then run on (0, C, S) and move nothing."""
    from mtrain.compat.ops import sync_bn
    x = torch.zeros(0, 3, 10)
    rm, rv = torch.tensor([1., 2., 3.]), torch.tensor([4., 5., 6.])
    out, norm, std = torch.zeros_like(x), torch.zeros(0, 3, 10), torch.zeros(3)
    sync_bn.sync_bn_forward_output(x, torch.zeros(3), torch.zeros(3), torch.ones(3),
                                   torch.zeros(3), rm, rv, norm, std, out, eps=1e-5,
                                   momentum=torch.zeros(1), group_size=1)
    assert rm.tolist() == [1., 2., 3.] and rv.tolist() == [4., 5., 6.]
    torch.testing.assert_close(std, torch.full((3,), 1e-5).sqrt())
