"""How long a checkpoint holds up training, written in place or in the background.

``python bench/checkpoint_save.py [--arch resnet50] [--repeats 5]`` saves the
model and its SGD-with-momentum state with ``runner.save_checkpoint`` both
ways, alternating, and prints the medians of (a) the time the training thread
is blocked and (b) the time until the file is whole on disk.
"""

import argparse
import logging
import statistics
import sys
import tempfile
import time

import torch
import torchvision

from mtrain.runner import EpochBasedRunner


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--arch', default='resnet50', help='a torchvision model builder')
    parser.add_argument('--repeats', type=int, default=5)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    model = getattr(torchvision.models, args.arch)()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for p in model.parameters():
        optimizer.state[p]['momentum_buffer'] = torch.zeros_like(p)
    size = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
    logger = logging.getLogger('bench.checkpoint')
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    blocked, whole = {False: [], True: []}, {False: [], True: []}
    with tempfile.TemporaryDirectory() as work_dir:
        runner = EpochBasedRunner(model, optimizer=optimizer, work_dir=work_dir, logger=logger,
                                  max_epochs=1)
        runner.save_checkpoint(work_dir, 'warmup.pth', background=True)  # first-touch costs
        runner.wait_for_checkpoint()
        for i in range(args.repeats):
            for background in (False, True):
                start = time.perf_counter()
                runner.save_checkpoint(work_dir, f'{i}_{background}.pth', background=background)
                blocked[background].append(time.perf_counter() - start)
                runner.wait_for_checkpoint()
                whole[background].append(time.perf_counter() - start)
    print(f'# {args.arch}: {size:.0f} MiB of parameters (+ as much momentum); '
          f'medians of {args.repeats}, seconds')
    for background in (False, True):
        name = 'async_save=True ' if background else 'async_save=False'
        print(f'{name}  training blocked {statistics.median(blocked[background]):.3f}  '
              f'file whole after {statistics.median(whole[background]):.3f}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
