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

mmselfsup 0.11 wraps inline in ``train_model``
(``MMDistributedDataParallel(model.cuda(), device_ids=[torch.cuda.current_device()])``):
there the harness swaps that module's ``MMDistributedDataParallel`` for the CPU
wrap, makes ``model.cuda()`` return the model and ``torch.cuda.current_device()``
0, and has its ``DistributedSampler`` broadcast its seed from a CPU tensor (its
``sync_random_seed`` defaults to ``device='cuda'``): CUDA-only calls that cannot run here. Under ``--mmcv-runner`` it also
replaces mmcv 1.7.2's ``init_dist``, whose ``torch.cuda.set_device(rank %
device_count())`` divides by zero without a GPU, by the same
``init_process_group`` call without it.
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


def selfsup_on_cpu() -> None:
    """mmselfsup's inline CUDA DDP wrap, on the CPU (see the module docstring)."""
    train = importlib.import_module('mmselfsup.apis.train')
    apis = importlib.import_module('mmselfsup.apis')
    train_model = train.train_model
    train.MMDistributedDataParallel = cpu_ddp

    def on_cpu(model, *args, **kwargs):
        model.cuda = lambda *_, **__: model  # this model only
        with mock.patch('torch.cuda.current_device', return_value=0):
            return train_model(model, *args, **kwargs)

    apis.train_model = train.train_model = on_cpu
    sampler = importlib.import_module('mmselfsup.datasets.samplers.distributed_sampler')
    sampler.sync_random_seed = functools.partial(sampler.sync_random_seed, device='cpu')


def mmcv_init_dist_on_cpu() -> None:
    """mmcv 1.7.2's own ``init_dist('pytorch')`` without its ``torch.cuda.set_device``."""
    import mmcv.runner
    if not mmcv.runner.init_dist.__module__.startswith('mmcv.'):
        return  # the route's init_dist runs on the CPU as it is

    def init_dist(launcher, backend='nccl', **kwargs):
        assert launcher == 'pytorch', launcher
        import torch.distributed as dist
        dist.init_process_group(backend=backend, **kwargs)

    mmcv.runner.init_dist = init_dist


def main() -> None:
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path.insert(0, osp.dirname(osp.abspath(script)))
    for module, name in WRAPS:  # the codebase whose tools/ the script is in
        if f'{osp.sep}{module.split(".")[0]}{osp.sep}' in script:
            setattr(importlib.import_module(module), name, cpu_ddp)
    if f'{osp.sep}mmselfsup{osp.sep}' in script:
        selfsup_on_cpu()
    mmcv_init_dist_on_cpu()
    runpy.run_path(script, run_name='__main__')


if __name__ == '__main__':
    main()
