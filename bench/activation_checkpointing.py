"""Peak memory and step time with and without activation checkpointing.

``python bench/activation_checkpointing.py [--layers 6] [--seq 512] [--batch 4] [--steps 5]``
trains a stack of ``nn.TransformerEncoderLayer`` (where activations dominate:
the attention scores grow with the square of the sequence) with SGD, plainly
and with ``activation_checkpointing=dict(modules=['TransformerEncoderLayer'])``
applied by mtrain's own function, each in a fresh process so that the peaks do
not mix. Per mode it prints:

- the bytes autograd keeps for the backward at the end of the forward (counted
  with ``saved_tensors_hooks``: exact, and the same on every machine);
- the peak memory of the training steps over the memory before them: on CUDA
  ``torch.cuda.max_memory_allocated``, on the CPU the peak RSS (``ru_maxrss``);
- the median step time (forward, backward, optimizer step).
"""

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

import torch
from torch import nn

from mtrain.models.activation_checkpointing import apply_activation_checkpointing


def _model(args) -> nn.Module:
    torch.manual_seed(0)
    layer = dict(d_model=args.width, nhead=4, dim_feedforward=4 * args.width, dropout=0.1,
                 batch_first=True)
    return nn.Sequential(*[nn.TransformerEncoderLayer(**layer) for _ in range(args.layers)])


def _saved_bytes(model: nn.Module, x: torch.Tensor) -> int:
    """What autograd holds for the backward after one forward (a storage counted once)."""
    storages = {}

    def pack(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x).sum().backward()
    return sum(storages.values())


def _peak(device: torch.device) -> int:
    if device.type == 'cuda':
        return torch.cuda.max_memory_allocated(device)
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def run_one(args) -> dict:
    """One mode in this process: the figures as a dict."""
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    model = _model(args).to(device)
    if args.mode == 'checkpointed':
        apply_activation_checkpointing(model, dict(modules=['TransformerEncoderLayer']))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(args.batch, args.seq, args.width, device=device)
    if device.type == 'cuda':
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(device)
    # the memory held before the first step (the model, the input); a step's peak is over it
    before = torch.cuda.memory_allocated(device) if device.type == 'cuda' else _rss_now()
    saved = _saved_bytes(model, x)
    model.zero_grad(set_to_none=True)
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        model(x).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == 'cuda':
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return {'mode': args.mode, 'saved_MiB': saved / 2**20,
            'peak_MiB': (_peak(device) - before) / 2**20, 'step_s': statistics.median(times)}


def _rss_now() -> int:
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--layers', type=int, default=6)
    parser.add_argument('--width', type=int, default=256)
    parser.add_argument('--seq', type=int, default=512)
    parser.add_argument('--batch', type=int, default=4)
    parser.add_argument('--steps', type=int, default=5)
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--mode', choices=['plain', 'checkpointed'], help='(one mode, internal)')
    args = parser.parse_args(argv)
    if args.mode:
        print(json.dumps(run_one(args)))
        return 0
    rows = []
    for mode in ('plain', 'checkpointed'):
        out = subprocess.run([sys.executable, __file__, *(argv or sys.argv[1:]), '--mode', mode],
                             check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(out.splitlines()[-1]))
    print(f'{args.layers} x TransformerEncoderLayer(d={args.width}), batch {args.batch} x '
          f'seq {args.seq}, {args.device}, {args.threads} thread(s), median of {args.steps} steps')
    print(f'{"mode":<14}{"saved for backward":>20}{"peak over start":>18}{"step time":>12}')
    for r in rows:
        print(f'{r["mode"]:<14}{r["saved_MiB"]:>16.1f} MiB{r["peak_MiB"]:>14.1f} MiB'
              f'{r["step_s"]:>11.3f}s')
    return 0


if __name__ == '__main__':
    sys.exit(main())
