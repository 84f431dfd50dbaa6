"""Run a 1.x codebase's ``tools/train.py`` on CPU processes (gloo): ``SCRIPT ARGS...``.

mmseg 0.30's ``build_ddp`` asserts ``device in ['cuda', 'mlu']`` and mmcls
0.25's ``wrap_distributed_model`` raises for ``'cpu'``; both move the model to
the GPU and pass ``device_ids``. This file replaces only those two functions
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
WRAPS = (('mmseg.apis.train', 'build_ddp'), ('mmcls.apis.train', 'wrap_distributed_model'))


def cpu_ddp(model, device='cuda', *args, **kwargs):
    """The codebase's DDP wrap, on the CPU: ``device`` and ``device_ids`` are dropped."""
    from mmcv.parallel import MMDistributedDataParallel
    kwargs.pop('device_ids', None)
    return MMDistributedDataParallel(model, *args, **kwargs)


def main() -> None:
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path.insert(0, osp.dirname(osp.abspath(script)))
    codebase = 'mmseg' if f'{osp.sep}mmseg{osp.sep}' in script else 'mmcls'
    for module, name in WRAPS:
        if module.startswith(codebase):
            setattr(importlib.import_module(module), name, cpu_ddp)
    runpy.run_path(script, run_name='__main__')


if __name__ == '__main__':
    main()
