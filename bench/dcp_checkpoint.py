"""What a checkpoint of an FSDP run costs each rank: whole file or sharded, in place or background.

``python bench/dcp_checkpoint.py [--width 4096] [--layers 3] [--repeats 3]`` trains an MLP
of ``layers`` square ``Linear(width, width)`` layers (SGD with momentum: the state is twice
the weights) on 2 gloo ranks on the CPU, sharded with ``MTFullyShardedDataParallel``, and
saves it ``repeats`` times in each of four ways, each in a fresh pair of processes:

- ``whole``: the whole-model file (``sharded=False``): every rank gathers the full state,
  rank 0 writes it;
- ``whole+async``: the same, rank 0 writing from a copy on the checkpoint writer thread;
- ``sharded``: each rank writes its shards (``sharded=True``, DCP);
- ``sharded+async``: from a copy of the shards, on the writer thread.

Printed per way, medians over the repeats, the slower rank's: the time the training loop
stands still per save (``gather_checkpoint_state`` + ``save_checkpoint``), the time until
the checkpoint is whole on disk, and each rank's peak resident memory during the saves above
what it held before the first one (``/proc/self/statm``, sampled every 2 ms; the largest of
the saves').
"""

import argparse
import os
import socket
import statistics
import sys
import tempfile
import threading
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from mtrain.parallel import MTFullyShardedDataParallel
from mtrain.runner import EpochBasedRunner
from mtrain.utils import get_logger

WAYS = {'whole': (False, False), 'whole+async': (False, True),
        'sharded': (True, False), 'sharded+async': (True, True)}
PAGE = os.sysconf('SC_PAGE_SIZE')


def _rss() -> int:
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * PAGE


class _PeakRSS:
    """The peak resident memory while active (sampled)."""

    def __enter__(self):
        self.peak = _rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, _rss())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss())


def _rank(rank, port, args, way, work_dir, results):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
    dist.init_process_group('gloo', rank=rank, world_size=2)
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(args.width, args.width)
                                  for _ in range(args.layers)])
    wrapped = MTFullyShardedDataParallel(model, shard_layers=['Linear'])
    optimizer = torch.optim.SGD(wrapped.parameters(), lr=0.01, momentum=0.9)
    wrapped.module(torch.randn(4, args.width)).square().mean().backward()
    optimizer.step()  # momentum for every parameter: the state is twice the weights
    logger = get_logger()
    logger.setLevel('WARNING')
    runner = EpochBasedRunner(wrapped, optimizer=optimizer, work_dir=work_dir, logger=logger,
                              max_epochs=1)
    runner.sharded_checkpoints, background = WAYS[way]
    rows, base = [], _rss()  # what the run holds before its first save
    for i in range(args.repeats + 1):  # the first one warms up (first touch, DCP's import)
        dist.barrier()
        start = time.perf_counter()
        with _PeakRSS() as memory:
            runner.gather_checkpoint_state(background=background)
            runner.save_checkpoint(work_dir, filename_tmpl=f'{i}.pth', background=background)
            stalled = time.perf_counter() - start
            runner.wait_for_checkpoint()
            dist.barrier()  # (sharded: rank 0 waits for the other ranks' shards anyway)
        # above the level before the first save: memory a save freed and the allocator kept
        # for the next one is counted too
        rows.append((stalled, time.perf_counter() - start, memory.peak - base))
        dist.barrier()
        if rank == 0:
            os.system(f'rm -rf {work_dir}/{i}.pth')
    results[rank] = rows[1:]
    dist.destroy_process_group()


def _run_way(args, way) -> list:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    results = mp.get_context('fork').Manager().dict()
    with tempfile.TemporaryDirectory() as work_dir:
        procs = [mp.get_context('fork').Process(target=_rank,
                                                args=(r, port, args, way, work_dir, results))
                 for r in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    return [results[0], results[1]]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--width', type=int, default=4096)
    parser.add_argument('--layers', type=int, default=3)
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--ways', nargs='+', default=list(WAYS), choices=list(WAYS))
    args = parser.parse_args(argv)
    params = args.layers * (args.width + 1) * args.width
    state = 2 * 4 * params / 2**20
    print(f'# FSDP on 2 gloo ranks (CPU): {params / 1e6:.1f} M parameters, {state:.0f} MiB of '
          f'state (fp32 weights + momentum), {state / 2:.0f} MiB a rank; '
          f'times: medians of {args.repeats}, the slower rank')
    print(f"{'way':<15}{'loop stalled s':>16}{'whole after s':>15}{'peak extra MiB r0/r1':>23}")
    for way in args.ways:
        ranks = _run_way(args, way)
        stalled = max(statistics.median(r[0] for r in rows) for rows in ranks)
        whole = max(statistics.median(r[1] for r in rows) for rows in ranks)
        peaks = [max(r[2] for r in rows) / 2**20 for rows in ranks]
        print(f'{way:<15}{stalled:>16.3f}{whole:>15.3f}{peaks[0]:>14.0f} / {peaks[1]:<6.0f}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
