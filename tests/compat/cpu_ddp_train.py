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
"""

import importlib
import os.path as osp
import runpy
import sys

#: The module each codebase's training function reads its DDP wrap from, and the name.
WRAPS = (('mmseg.apis.train', 'build_ddp'), ('mmcls.apis.train', 'wrap_distributed_model'),
         ('mmdet.apis.train', 'build_ddp'))


def cpu_ddp(model, device='cuda', *args, **kwargs):
    """The codebase's DDP wrap, on the CPU: ``device`` and ``device_ids`` are dropped."""
    from mmcv.parallel import MMDistributedDataParallel
    kwargs.pop('device_ids', None)
    return MMDistributedDataParallel(model, *args, **kwargs)


def main() -> None:
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path.insert(0, osp.dirname(osp.abspath(script)))
    for module, name in WRAPS:  # the codebase whose tools/ the script is in
        if f'{osp.sep}{module.split(".")[0]}{osp.sep}' in script:
            setattr(importlib.import_module(module), name, cpu_ddp)
    runpy.run_path(script, run_name='__main__')


if __name__ == '__main__':
    main()
