"""The optional comparison: the same training with mmengine's ``Runner`` and its default hooks.

mmengine is installed with mtrain (it provides ``Config`` and ``Registry``), so this
comparison runs wherever mtrain does. Its console output goes to a string buffer
(the log file in the work dir keeps it), so the table stays readable.
"""

import contextlib
import io
import itertools
from typing import Any, Dict, List, Optional, Tuple

import torch
from mmengine.hooks import Hook as MMEHook
from mmengine.model import BaseModel
from mmengine.runner import Runner

from workloads import INTERVAL, WORKLOADS, BenchClassifier, clock, dataset_for, rss_bytes

_RUN_IDS = itertools.count()


class _Model(BaseModel):
    """``BenchClassifier`` behind mmengine's model interface (``mode='loss'``)."""

    def __init__(self, arch: str) -> None:
        super().__init__()
        self.clf = BenchClassifier(arch)

    def forward(self, img: torch.Tensor, gt_label: Optional[torch.Tensor] = None,
                mode: str = 'tensor') -> Any:
        return self.clf(img, gt_label if mode == 'loss' else None)


class _Marks(MMEHook):
    """Clock readings (and resident memory) at the first train step and after ``marks``."""

    def __init__(self, marks: List[int]) -> None:
        self.marks = set(marks)
        self.times: Dict[int, float] = {}
        self.rss: Dict[int, int] = {}

    def before_train(self, runner) -> None:
        self.times[0] = clock()
        self.rss[0] = rss_bytes()

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if runner.iter + 1 in self.marks:
            self.times[runner.iter + 1] = clock()
            self.rss[runner.iter + 1] = rss_bytes()


def mmengine_run(name: str, epochs: int, work_dir: str,
                 marks: Tuple[int, ...] = ()) -> Tuple[float, Dict[int, float], Dict[int, int]]:
    """Train ``name`` with mmengine's Runner; returns (seconds from the first step to the
    end of ``train()``, clock readings and resident memory at ``marks``)."""
    arch, _, batch, per_epoch = WORKLOADS[name]
    loader = torch.utils.data.DataLoader(dataset_for(name), batch_size=batch, shuffle=True,
                                         generator=torch.Generator().manual_seed(0))
    probe = _Marks(list(marks))
    threads = torch.get_num_threads()
    with contextlib.redirect_stdout(io.StringIO()):  # mmengine logs to stdout at INFO
        runner = Runner(
            model=_Model(arch), work_dir=work_dir, train_dataloader=loader,
            train_cfg=dict(by_epoch=True, max_epochs=epochs),
            optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.01, momentum=0.9,
                                              weight_decay=1e-4)),
            param_scheduler=dict(type='CosineAnnealingLR', T_max=epochs * per_epoch,
                                 eta_min=0.0, by_epoch=False),
            default_hooks=dict(logger=dict(type='LoggerHook', interval=INTERVAL),
                               checkpoint=dict(type='CheckpointHook', interval=epochs)),
            custom_hooks=[probe], experiment_name=f'bench_{next(_RUN_IDS)}',
            randomness=dict(seed=0), default_scope='mmengine')
        torch.set_num_threads(threads)  # keep the benchmark's thread count
        runner.train()
        end = clock()
    return end - probe.times[0], probe.times, probe.rss
