"""A real out-of-memory error recovered by ``micro_batch='auto'``, with its figures.

``python bench/oom_recovery.py --device cuda --memory-gib 8 [--batch 256] [--size 224]``
caps this process's CUDA memory (``torch.cuda.set_per_process_memory_fraction``)
so that a ResNet-18 training step on ``--batch`` images does not fit, then
trains ``--iters`` iterations three ways, each on the same synthetic data and
from the same weights:

- ``auto``: ``optimizer_config.micro_batch='auto'``: the first batch runs out of
  memory, is rerun in halves until it fits, and the size found is kept;
- ``fixed``: micro-batches of that size from the start (the weights must equal
  ``auto``'s; bitwise with ``--deterministic``);
- ``off``: no micro-batching: the one-line error.

It prints, per way, the size used, the median iteration time after the first,
the peak memory (``torch.cuda.max_memory_allocated``) and the largest weight
difference from ``auto``. ``--device cpu --simulate K`` replaces the memory cap
by a model that raises ``torch.OutOfMemoryError`` above K images (to check the
script without a GPU; its times say nothing about a GPU).
"""

import argparse
import json
import logging
import os
import statistics
import time

import torch
import torchvision
from torch import nn

from mtrain.hooks import Hook, OptimizerHook
from mtrain.parallel import ModelWrapper
from mtrain.runner import IterBasedRunner


class Classifier(nn.Module):
    """ResNet-18 under mtrain's model contract; optionally out of memory above ``limit`` images."""

    def __init__(self, limit=None) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net, self.limit = torchvision.models.resnet18(num_classes=10), limit

    def forward(self, img, gt_label=None):
        if self.limit is not None and img.shape[0] > self.limit:
            raise torch.OutOfMemoryError(f'simulated: more than {self.limit} images')
        return {'loss': nn.functional.cross_entropy(self.net(img), gt_label)}


class Clock(Hook):
    """Wall time of every iteration (synchronised on CUDA)."""

    def __init__(self, device) -> None:
        self.device, self.times = device, []

    def before_train_iter(self, runner) -> None:
        self._sync()
        self.start = time.perf_counter()

    def after_train_iter(self, runner) -> None:
        self._sync()
        self.times.append(time.perf_counter() - self.start)

    def _sync(self) -> None:
        if self.device.type == 'cuda':
            torch.cuda.synchronize(self.device)


def _batches(args, device):
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(args.batch, 3, args.size, args.size, generator=g),
             torch.randint(0, 10, (args.batch,), generator=g)) for _ in range(args.iters)]
    while True:
        for img, label in data:
            yield {'img': img.to(device), 'gt_label': label.to(device)}


def train(args, micro):
    device = torch.device(args.device)
    model = Classifier(args.simulate).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    runner = IterBasedRunner(ModelWrapper(model), optimizer=optimizer, work_dir=args.work_dir,
                             logger=logging.getLogger('oom_bench'), max_iters=args.iters)
    runner.register_hook(OptimizerHook(micro_batch=micro))
    clock = Clock(device)
    runner.register_hook(clock)
    if device.type == 'cuda':
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    runner.run([_batches(args, device)], [('train', args.iters)])
    peak = torch.cuda.max_memory_allocated(device) if device.type == 'cuda' else None
    return runner, dict(size=runner.optim_step.micro_batch.size, peak_bytes=peak,
                        median_iter_s=statistics.median(clock.times[1:] or clock.times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--device', default='cuda')
    parser.add_argument('--memory-gib', type=float, default=8.)
    parser.add_argument('--batch', type=int, default=256)
    parser.add_argument('--size', type=int, default=224)
    parser.add_argument('--iters', type=int, default=4)
    parser.add_argument('--simulate', type=int, default=None)
    parser.add_argument('--deterministic', action='store_true')
    parser.add_argument('--work-dir', default='/tmp/oom_bench')
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    if args.deterministic:
        os.environ.setdefault('CUBLAS_WORKSPACE_CONFIG', ':4096:8')
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False
    if args.device.startswith('cuda') and args.simulate is None:
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(args.memory_gib * 2**30 / total)
    auto_runner, auto = train(args, 'auto')
    fixed_runner, fixed = train(args, auto['size'])
    reference = auto_runner.model_wrapper.module.state_dict()
    fixed['max_weight_diff'] = max((v.float() - reference[k].float()).abs().max().item()
                                   for k, v in fixed_runner.model_wrapper.module.state_dict().items())
    try:
        train(args, None)
        off = 'ran without an error: the cap is too high for --batch'
    except torch.OutOfMemoryError as e:
        off = str(e)
    print(json.dumps(dict(batch=args.batch, memory_gib=args.memory_gib, auto=auto, fixed=fixed,
                          off=off), indent=1))


if __name__ == '__main__':
    main()
