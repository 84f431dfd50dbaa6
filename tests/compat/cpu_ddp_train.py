"""Run a 1.x codebase's ``tools/train.py`` on CPU processes (gloo): ``SCRIPT ARGS...``.

mmseg 0.30's and mmdet 2.28's ``build_ddp`` assert a GPU device (``'cuda'``,
``'mlu'``, ``'npu'``) and mmcls 0.25's ``wrap_distributed_model`` raises for
``'cpu'``; each moves the model to the GPU and passes ``device_ids``. This file
replaces only the script's codebase's function
with the same wrap on the CPU (``MMDistributedDataParallel(model, **kwargs)``
without ``device_ids``), then runs the script as ``__main__`` unchanged. The
configs of the tests use ``BN``, so no ``SyncBN`` is replaced. Run it under
the route: ``torchrun ... -m mtrain.compat.run cpu_ddp_train.py TOOL CONFIG
--launcher pytorch``.

mmgen 0.7 has no such function: its ``train_model`` calls ``model.cuda()`` and
passes ``device_ids=[torch.cuda.current_device()]`` to its own
``DistributedDataParallelWrapper``, which moves each submodule to the GPU and
scatters inputs to the current device; its ``DistributedSampler`` broadcasts
the shuffle seed from a CUDA tensor (``sync_random_seed(device='cuda')``); its
``DynamicIterBasedRunner.resume``
loads onto ``torch.cuda.current_device()`` by default. :func:`cpu_mmgen`
replaces those, and only those, for a CPU-only machine (one process too, for
``--resume-from``), under mmcv's own runner as under the route. Under mmcv's
own runner (``--mmcv-runner``), whose ``init_dist`` divides by the GPU count,
:func:`cpu_init_dist` stands in for it, and its ``MMDistributedDataParallel``
gets back the ``_use_replicated_tensor_module = False`` that torch 1.13's DDP
had and that its ``_run_ddp_forward`` reads (torch 2.x dropped it), so that
both runners run 2 processes.

mmselfsup 0.11 wraps inline in ``train_model``
(``MMDistributedDataParallel(model.cuda(), device_ids=[torch.cuda.current_device()])``)
and its ``DistributedSampler`` broadcasts its seed from a CUDA tensor:
:func:`cpu_mmselfsup` swaps that module's ``MMDistributedDataParallel`` for the
CPU wrap, makes ``model.cuda()`` return the model and ``current_device()`` 0
while ``train_model`` runs, and has the sampler broadcast from the CPU.
"""

import functools
import importlib
import os.path as osp
import runpy
import sys
from unittest import mock

#: The module each codebase's training function reads its DDP wrap from, and the name.
WRAPS = (('mmseg.apis.train', 'build_ddp'), ('mmcls.apis.train', 'wrap_distributed_model'),
         ('mmdet.apis.train', 'build_ddp'))


def cpu_ddp(model, device='cuda', *args, **kwargs):
    """The codebase's DDP wrap, on the CPU: ``device`` and ``device_ids`` are dropped."""
    from mmcv.parallel import MMDistributedDataParallel
    kwargs.pop('device_ids', None)
    return MMDistributedDataParallel(model, *args, **kwargs)


def cpu_init_dist(launcher, backend='gloo', **kwargs):
    """mmcv 1.7.2's ``init_dist('pytorch')`` without its ``torch.cuda.set_device``."""
    import torch.distributed as dist
    assert launcher == 'pytorch', f'cpu_ddp_train.py: launcher {launcher!r} not stood in for'
    dist.init_process_group(backend=backend, **kwargs)


def cpu_mmgen() -> None:
    """mmgen's CUDA-only steps on the CPU (see the module docstring); ``model.cuda()``
    and ``current_device()`` become no-ops whose results the CPU wrapper ignores."""
    import torch
    from mmcv.parallel import MMDistributedDataParallel
    from mmcv.parallel.scatter_gather import scatter_kwargs
    from mmgen.apis import train
    from mmgen.core.ddp_wrapper import DistributedDataParallelWrapper
    from mmgen.core.runners import DynamicIterBasedRunner
    from mmgen.utils import dist_util

    class CpuWrapper(DistributedDataParallelWrapper):
        """mmgen's wrapper: each trainable submodule in its own DDP, without devices."""

        def to_ddp(self, device_ids, dim, broadcast_buffers, find_unused_parameters, **kwargs):
            for name, module in self.module._modules.items():
                if any(p.requires_grad for p in module.parameters()):
                    self.module._modules[name] = MMDistributedDataParallel(
                        module, dim=dim, broadcast_buffers=broadcast_buffers,
                        find_unused_parameters=find_unused_parameters, **kwargs)

        def scatter(self, inputs, kwargs, device_ids):
            return scatter_kwargs(inputs, kwargs, [-1], dim=self.dim)

    train.DistributedDataParallelWrapper = CpuWrapper
    train.MMDistributedDataParallel = cpu_ddp  # the whole GAN in one DDP (use_ddp_wrapper=False)
    torch.nn.Module.cuda = lambda self, device=None: self
    torch.cuda.current_device = lambda: 0
    dist_util.sync_random_seed.__defaults__ = (None, 'cpu')
    DynamicIterBasedRunner.resume.__defaults__ = (True, True, 'cpu')


def cpu_mmselfsup() -> None:
    """mmselfsup's CUDA-only steps on the CPU (see the module docstring)."""
    train = importlib.import_module('mmselfsup.apis.train')
    apis = importlib.import_module('mmselfsup.apis')
    sampler = importlib.import_module('mmselfsup.datasets.samplers.distributed_sampler')
    train_model = train.train_model
    train.MMDistributedDataParallel = cpu_ddp

    def on_cpu(model, *args, **kwargs):
        model.cuda = lambda *_, **__: model  # this model only
        with mock.patch('torch.cuda.current_device', return_value=0):
            return train_model(model, *args, **kwargs)

    apis.train_model = train.train_model = on_cpu
    sampler.sync_random_seed = functools.partial(sampler.sync_random_seed, device='cpu')


def main() -> None:
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path.insert(0, osp.dirname(osp.abspath(script)))
    for module, name in WRAPS:  # the codebase whose tools/ the script is in
        if f'{osp.sep}{module.split(".")[0]}{osp.sep}' in script:
            setattr(importlib.import_module(module), name, cpu_ddp)
    runner = importlib.import_module('mmcv.runner')
    if runner.init_dist.__module__.startswith('mmcv.'):  # mmcv's own (not the route's)
        runner.init_dist = cpu_init_dist
        importlib.import_module('mmcv.parallel').MMDistributedDataParallel.\
            _use_replicated_tensor_module = False
    if f'{osp.sep}mmgen{osp.sep}' in script:
        cpu_mmgen()
    if f'{osp.sep}mmselfsup{osp.sep}' in script:
        cpu_mmselfsup()
    runpy.run_path(script, run_name='__main__')


if __name__ == '__main__':
    main()
