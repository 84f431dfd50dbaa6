"""1.x-style optimizer hook subclasses, trained by either library: ``python THIS mmcv OUT``.

:func:`train_all` takes the library's ``mmcv.runner``-like namespace (mmcv 1.7.2's own,
or mtrain's classes of the same names), trains a tiny model under each subclass
with an ``IterBasedRunner`` and returns the weights and what each hook saw.
Run as a script under mmcv 1.7.2's Python it saves mmcv's numbers to ``OUT``;
test_optimizer_mmcv_points.py calls :func:`train_all` with mtrain's classes and
compares. The subclasses are written the way that era's code writes them.
"""

import logging
import sys
import tempfile
import warnings
from types import SimpleNamespace

import torch
from torch import nn
from torch.utils.data import DataLoader

MAX_ITERS, CUMULATIVE = 7, 3


class ToyModel(nn.Module):
    """mmcv's test model: one Linear, constant init, ``train_step`` returns the mean."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        nn.init.constant_(self.fc.weight, 1.)
        nn.init.constant_(self.fc.bias, 1.)

    def forward(self, x):
        return self.fc(x)

    def train_step(self, x, optimizer, **kwargs):
        return dict(loss=(self(x) ** 2).mean(), num_samples=x.shape[0])


def hook_classes(lib):
    """The subclasses, on ``lib``'s ``OptimizerHook``/``GradientCumulativeOptimizerHook``."""

    class SummedWindow(lib.GradientCumulativeOptimizerHook):
        """Overrides the loss factor: the window's losses are summed, except the last one's."""

        def _get_loss_factor(self, runner):
            factor = 1 if runner.iter < self.divisible_iters else self.remainder_iters
            self.asked.append((runner.iter, factor))
            return factor

    class OwnLoop(lib.GradientCumulativeOptimizerHook):
        """mmcv's GradientCumulativeOptimizerHook.after_train_iter, copied with a log line."""

        def after_train_iter(self, runner):
            if not self.initialized:
                self._init(runner)
            loss = runner.outputs['loss'] / self._get_loss_factor(runner)
            loss.backward()
            if self.every_n_iters(runner, self.cumulative_iters) or self.is_last_iter(runner):
                grad_norm = self.clip_grads(runner.model.parameters())
                self.asked.append(float(grad_norm))
                runner.optimizer.step()
                runner.optimizer.zero_grad()

    class SelfsupStyle(lib.OptimizerHook):
        """An mmselfsup-0.x-style hook: no base __init__, its own _init and before_run."""

        def __init__(self, update_interval=1, grad_clip=None):
            self.grad_clip = grad_clip
            self.update_interval = update_interval
            self.initialized = False

        def _init(self, runner):
            self.divisible_iters = runner.max_iters // self.update_interval * self.update_interval
            self.remainder_iters = runner.max_iters - self.divisible_iters
            self.initialized = True

        def before_run(self, runner):
            runner.optimizer.zero_grad()

        def after_train_iter(self, runner):
            if not self.initialized:
                self._init(runner)
            factor = (self.update_interval if runner.iter < self.divisible_iters
                      else self.remainder_iters)
            runner.outputs['loss'] /= factor
            runner.outputs['loss'].backward()
            if self.every_n_iters(runner, self.update_interval) or self.is_last_iter(runner):
                self.asked.append(float(self.clip_grads(runner.model.parameters())))
                runner.optimizer.step()
                runner.optimizer.zero_grad()

    clip = dict(max_norm=2.)  # (clips the first windows, not the last)
    return {'summed': lambda: SummedWindow(cumulative_iters=CUMULATIVE),
            'own_loop': lambda: OwnLoop(cumulative_iters=CUMULATIVE, grad_clip=clip),
            'selfsup': lambda: SelfsupStyle(update_interval=CUMULATIVE, grad_clip=clip)}


def train_all(lib):
    """``{name: {'weight', 'bias', 'asked', 'divisible', 'remainder'}}`` for each subclass."""
    torch.manual_seed(0)
    data = torch.rand(MAX_ITERS, 3)
    results = {}
    for name, make in hook_classes(lib).items():
        model = ToyModel()
        runner = lib.IterBasedRunner(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                                     work_dir=tempfile.mkdtemp(), logger=logging.getLogger(),
                                     max_iters=MAX_ITERS)
        hook = make()
        hook.asked = []
        runner.register_hook(hook)
        runner.run([DataLoader(data, batch_size=1)], [('train', 1)])
        results[name] = dict(weight=model.fc.weight.detach().clone(),
                             bias=model.fc.bias.detach().clone(), asked=hook.asked,
                             divisible=hook.divisible_iters, remainder=hook.remainder_iters)
    return results


if __name__ == '__main__':
    with warnings.catch_warnings():  # (mmcv 1.7.2 announces mmcv 2.0 on import)
        warnings.simplefilter('ignore')
        from mmcv import runner as mmcv_runner
    torch.save(train_all(SimpleNamespace(**vars(mmcv_runner))), sys.argv[2])
