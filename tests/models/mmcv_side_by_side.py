"""One script, two libraries: ``python mmcv_side_by_side.py mmcv|mtrain OUT_DIR``.

Run under mmcv 1.7.2's own environment with ``mmcv`` and under mtrain's with
``mtrain``, it builds the same models and batches with that library's
``BaseModule``/initializers and ``collate``/``scatter``, and saves what came
out (weights, the init-info log text, collated and scattered batches) to
``OUT_DIR/<library>.pt`` for test_mmcv_reference.py to compare.
"""

import logging
import os
import sys
import warnings

import torch
from torch import nn

LIB, OUT = sys.argv[1], sys.argv[2]
if LIB == 'mmcv':
    with warnings.catch_warnings():  # (mmcv 1.7.2 announces mmcv 2.0 on import)
        warnings.simplefilter('ignore')
        from mmcv.parallel import DataContainer as DC, collate, scatter_kwargs
        from mmcv.runner import BaseModule, ModuleList, Sequential, save_checkpoint
        from mmcv.utils import get_logger
    logger = get_logger('mmcv')
else:
    from mtrain.parallel import DataContainer as DC, collate, scatter_kwargs
    from mtrain.runner import BaseModule, ModuleList, Sequential, save_checkpoint
    from mtrain.utils import get_logger
    logger = get_logger('mtrain')


class Block(BaseModule):
    def __init__(self, init_cfg=None):
        super().__init__(init_cfg)
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 5)


class Net(BaseModule):
    def __init__(self, pretrained=None):
        super().__init__(init_cfg=[
            dict(type='Kaiming', layer='Conv2d'),
            dict(type='Constant', val=1, layer='_BatchNorm'),
            dict(type='TruncNormal', std=0.02, layer='Linear',
                 override=dict(name='head', type='Normal', std=0.01, bias_prob=0.01))])
        self.blocks = ModuleList([Block(dict(type='Xavier', layer='Conv2d',
                                             distribution='uniform')), Block()])
        self.seq = Sequential(nn.Linear(5, 5), nn.Conv2d(8, 8, 1),
                              init_cfg=dict(type='Caffe2Xavier', layer=['Conv2d', 'Linear']))
        self.head = nn.Linear(5, 3)
        self.extra = Block(dict(type='Uniform', a=-0.5, b=0.5, layer='Linear',
                                override=dict(name='conv')))
        if pretrained:
            self.loaded = Block(dict(type='Pretrained', checkpoint=pretrained, prefix='extra.'))


def init_log(model):
    path = os.path.join(OUT, f'{LIB}_init.log')
    handler = logging.FileHandler(path, 'w')
    logger.addHandler(handler)
    try:
        model.init_weights()
    finally:
        logger.removeHandler(handler)
        handler.close()
    with open(path) as f:
        return f.read()


def batches():
    samples = [dict(img=DC(torch.full((3, 4 + i, 6 - i), float(i)), stack=True),
                    gt_semantic_seg=DC(torch.full((1, 4 + i, 6 - i), i), stack=True,
                                       padding_value=255),
                    gt_bboxes=DC(torch.ones(i + 1, 4)),
                    img_metas=DC(dict(index=i, flip=None), cpu_only=True),
                    label=torch.tensor(i)) for i in range(5)]
    collated = collate(samples, samples_per_gpu=2)
    unpacked = scatter_kwargs((collate(samples[:2], 2), 'opt'), dict(flag=1), [-1])
    plain = lambda c: c.data if isinstance(c, DC) else c  # noqa: E731
    return {k: plain(v) for k, v in collated.items()}, unpacked


torch.manual_seed(7)
first = Net()
first_log = init_log(first)
save_checkpoint(first, os.path.join(OUT, f'{LIB}_first.pth'))
torch.manual_seed(8)
second = Net(pretrained=os.path.join(OUT, f'{LIB}_first.pth'))
second.init_weights()
torch.save(dict(first=first.state_dict(), second=second.state_dict(), log=first_log,
                batches=batches()), os.path.join(OUT, f'{LIB}.pt'))
