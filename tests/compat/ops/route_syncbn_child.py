"""One rank of mmcv 1.7.2's own SyncBatchNorm (MMSyncBN) on mtrain's ``mmcv._ext``, via the route.

``python route_syncbn_child.py PORT RANK WORLD``: every rank holds the same
16-image batch and runs its own slice through ``mmcv.ops.SyncBatchNorm`` (the
all-reduces are mmcv's wrapper's, over gloo); prints one JSON line comparing
its slice with ``nn.BatchNorm2d`` over the whole batch (output, input
gradient, running statistics; the affine gradients as mmcv averages them over
the ranks). Used by tests/compat/ops/test_op_route_dense.py.
"""

import json
import os
import sys

from mtrain.compat import mmcv as route

route.enable()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def main(port: str, rank: int, world: int) -> None:
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=port)
    dist.init_process_group('gloo', rank=rank, world_size=world)
    from mmcv.ops import SyncBatchNorm
    torch.manual_seed(0)
    ours, ref = SyncBatchNorm(3), torch.nn.BatchNorm2d(3)
    torch.nn.init.uniform_(ours.weight)
    torch.nn.init.uniform_(ours.bias)
    ref.load_state_dict(ours.state_dict())
    x, grad = torch.randn(16, 3, 5, 6) * 3 + 1, torch.randn(16, 3, 5, 6)
    part = slice(rank * 16 // world, (rank + 1) * 16 // world)
    xs, xr = x[part].clone().requires_grad_(), x.clone().requires_grad_()
    out_s, out_r = ours(xs), ref(xr)
    out_s.backward(grad[part])
    out_r.backward(grad)
    diffs = {
        'output': (out_s - out_r[part]).abs().max(),
        'grad_input': (xs.grad - xr.grad[part]).abs().max(),
        'running_mean': (ours.running_mean - ref.running_mean).abs().max(),
        'running_var': (ours.running_var - ref.running_var).abs().max(),
        'grad_weight': (ours.weight.grad - ref.weight.grad / world).abs().max(),
        'grad_bias': (ours.bias.grad - ref.bias.grad / world).abs().max(),
    }
    dist.destroy_process_group()
    print(json.dumps({k: float(v) for k, v in diffs.items()}))


if __name__ == '__main__':
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
