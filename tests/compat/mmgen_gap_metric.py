"""``MeanGap``: an mmgen 0.7 metric that needs no download, for ``GenerativeEvalHook``.

The gap between the mean pixel of the real and of the fake images, and each
mean, in the ``_result_dict`` the hook copies into ``runner.log_buffer.output``
on rank 0. Imported by ``gan_eval.py``'s ``custom_imports`` (PYTHONPATH).
"""

import torch
from mmgen.core.evaluation.metrics import Metric
from mmgen.core.registry import METRICS


@METRICS.register_module()
class MeanGap(Metric):
    name = 'MeanGap'

    def prepare(self):
        self.sums = {'reals': 0.0, 'fakes': 0.0}

    def feed_op(self, batch, mode):
        self.sums[mode] += batch.double().mean(dim=(1, 2, 3)).sum().item()

    @torch.no_grad()
    def summary(self):
        self.check()
        real, fake = (self.sums[k] / self.num_images for k in ('reals', 'fakes'))
        self._result_dict = dict(mean_gap=abs(real - fake), mean_real=real, mean_fake=fake)
        self._result_str = f'{abs(real - fake):.6f}'
        return self._result_dict

    def clear(self, clear_reals=False):
        self.num_fake_feeded = 0
        self.sums['fakes'] = 0.0
        if clear_reals:
            self.num_real_feeded = 0
            self.sums['reals'] = 0.0
