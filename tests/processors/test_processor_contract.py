"""The batch-processor contract: docs/batch_processors.md's custom processor runs as documented."""

import os.path as osp
import re

import torch

from mtrain.hooks import GradientCumulativeOptimizerHook, Hook, OptimizerHook
from mtrain.processors import BasicBatchProcessor, BatchProcessor
from mtrain.registry import BATCH_PROCESSORS

DOC = osp.join(osp.dirname(__file__), '..', '..', 'docs', 'batch_processors.md')


def _doc_processor_class():
    """Execute the first python block of the doc's "Write your own" section; return the class."""
    with open(DOC) as f:
        text = f.read()
    section = text.split('## Write your own batch processor', 1)[1]
    code = re.search(r'```python\n(.*?)```', section, re.S).group(1)
    BATCH_PROCESSORS.module_dict.pop('NoisyTwinProcessor', None)  # run the block afresh
    namespace = {}
    exec(compile(code, DOC, 'exec'), namespace)
    return namespace['NoisyTwinProcessor']


def _train(make_runner, loader, processor, hook):
    runner = make_runner(max_len=2, momentum=0.9, batch_processor=processor)
    runner.register_hook(hook)
    runner.run([loader], [('train', 1)])
    return runner


def test_the_documented_processor_without_noise_equals_the_basic_one(make_runner, toy_loader):
    cls = _doc_processor_class()
    assert issubclass(cls, BatchProcessor) and BATCH_PROCESSORS.get('NoisyTwinProcessor') is cls
    for hook in (OptimizerHook, lambda: GradientCumulativeOptimizerHook(cumulative_iters=3)):
        twin = _train(make_runner, toy_loader, cls(noise=0.), hook())
        basic = _train(make_runner, toy_loader, BasicBatchProcessor(), hook())
        assert twin.num_updates == basic.num_updates
        for (name, a), b in zip(twin.model_wrapper.module.state_dict().items(),
                                basic.model_wrapper.module.state_dict().values()):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-6, msg=name)


def test_the_documented_processor_calls_every_hook_point(make_runner, toy_loader):
    cls = _doc_processor_class()
    runner = make_runner(max_len=1, batch_processor=cls(noise=0.1))
    runner.register_hook(OptimizerHook())
    seen = []

    class Recorder(Hook):
        def before_forward(self, runner):
            seen.append('before_forward')

        def after_forward(self, runner):
            seen.append('after_forward')

        def before_backward(self, runner):
            seen.append('before_backward')

        def after_backward(self, runner):
            seen.append('after_backward')

        def before_optimizer_step(self, runner):
            seen.append('before_optimizer_step')

    runner.register_hook(Recorder())
    runner.run([toy_loader], [('train', 1)])
    per_step = ['before_forward', 'after_forward', 'before_backward', 'after_backward'] * 2
    assert seen[:9] == per_step + ['before_optimizer_step']
    assert len(seen) == 9 * len(toy_loader)


def test_a_processor_without_does_backward_still_trains(make_runner, toy_loader):
    """A duck-typed processor written to the contract's docstring (no base class)."""
    class Plain:
        def __call__(self, runner, batch, train_mode):
            return BasicBatchProcessor()(runner, batch, train_mode)

    runner = _train(make_runner, toy_loader, Plain(), OptimizerHook())
    assert runner.num_updates == 2 * len(toy_loader)
