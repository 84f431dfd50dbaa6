"""Run mmdetection 2.x's ``tools/train.py`` on CPU processes (gloo): ``SCRIPT ARGS...``.

mmdet 2.28's ``train_detector`` wraps the model with ``build_ddp(model,
cfg.device, device_ids=[LOCAL_RANK])``, which asserts ``device in ['cuda',
'mlu', 'npu']`` and moves the model to the GPU. This file replaces only that
name in ``mmdet.apis.train`` by the same wrap on the CPU
(``MMDistributedDataParallel(model, **kwargs)`` without ``device_ids``), then
runs the script as ``__main__`` unchanged. The configs use ``BN``, so no
``SyncBN`` is replaced. Run it under the route: ``torchrun ... -m
mtrain.compat.run mmdet_cpu_ddp.py TOOL CONFIG --launcher pytorch``.
"""

import os.path as osp
import runpy
import sys


def cpu_ddp(model, device='cuda', *args, **kwargs):
    """mmdet's ``build_ddp`` on the CPU: ``device`` and ``device_ids`` are dropped."""
    from mmcv.parallel import MMDistributedDataParallel
    kwargs.pop('device_ids', None)
    return MMDistributedDataParallel(model, *args, **kwargs)


def main() -> None:
    import mmdet.apis.train
    mmdet.apis.train.build_ddp = cpu_ddp
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path.insert(0, osp.dirname(osp.abspath(script)))
    runpy.run_path(script, run_name='__main__')


if __name__ == '__main__':
    main()
