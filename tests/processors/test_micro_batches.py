"""optimizer_config.micro_batch: a batch that runs out of memory is rerun in micro-batches, exactly.

The models raise ``torch.OutOfMemoryError`` when a forward (or a backward)
gets more than ``limit`` samples, which is how CUDA's error reaches the step.
An ``'auto'`` run that splits at its first iteration must end with the
weights of a run that used micro-batches of that size from the start,
bitwise (the same additions in the same order), and with the unsplit run's
to float tolerance (the gradient sums are added in another order).
"""

import collections

import pytest
import torch

from mtrain.hooks import (CheckpointHook, Fp16OptimizerHook, GradientCumulativeOptimizerHook,
                          OptimizerHook)
from mtrain.processors import MultiBatchProcessor, parse_losses
from mtrain.processors.micro_batches import split_batch
from mtrain.step import OutOfMemoryStop
from mtrain.utils import ConfigError
from mtrain.utils.data_container import DataContainer

from conftest import ToyModel

OOM = 'CUDA out of memory. Tried to allocate 2.00 GiB'


class ForwardLimit(ToyModel):
    """The toy model, out of memory in a forward of more than ``limit`` samples."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def forward(self, img, gt_label=None):
        if self.training and img.shape[0] > self.limit:
            raise torch.OutOfMemoryError(OOM)
        return super().forward(img, gt_label)


class _RaiseInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, limit):
        ctx.limit = limit
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        if grad.shape[0] > ctx.limit:
            raise torch.OutOfMemoryError(OOM + ' (backward)')
        return grad, None


class BackwardLimit(ToyModel):
    """Out of memory in a backward of more than ``limit`` samples, after fc2's gradients exist."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def forward(self, img, gt_label=None):
        hidden = _RaiseInBackward.apply(torch.relu(self.fc1(img)), self.limit)
        logits = self.fc2(hidden)
        return {'loss_cls': torch.nn.functional.cross_entropy(logits, gt_label)}


def _train(make_runner, loader, model, hook, max_len=1, **kwargs):
    runner = make_runner(model=model, max_len=max_len, momentum=0.9, **kwargs)
    runner.register_hook(hook)
    runner.run([loader], [('train', 1)])
    return runner


def _weights(runner):
    return {k: v.clone() for k, v in runner.model_wrapper.module.state_dict().items()}


def _assert_equal(a, b):
    for k in a:
        assert torch.equal(a[k], b[k]), k


HOOKS = {
    'fp32': lambda micro: OptimizerHook(micro_batch=micro),
    'accumulation': lambda micro: GradientCumulativeOptimizerHook(cumulative_iters=3,
                                                                  micro_batch=micro),
    'bf16': lambda micro: Fp16OptimizerHook(dtype='bfloat16', micro_batch=micro),
    # init_scale 2**22 overflows float16: the first 4 steps are skipped (halving the scale)
    'fp16_skips': lambda micro: Fp16OptimizerHook(loss_scale=dict(init_scale=2.**22),
                                                  micro_batch=micro),
}
#: How close the split run's weights come to the unsplit run's after 8 iterations (measured:
#: fp32 3.0e-8, accumulation 7.5e-9, bf16 4.8e-4, with weights that moved by up to 0.5).
#: Not compared under float16 loss scaling: the overflow check sees each micro-batch's float16
#: gradient sums, smaller than the whole batch's, so a scale at the edge skips a step in one
#: run and not the other (here the unsplit run skips 5 steps, the split ones 4).
TOLERANCE = {'fp32': 1e-6, 'accumulation': 1e-6, 'bf16': 2e-3}


@pytest.mark.parametrize('kind', list(HOOKS))
def test_auto_split_equals_fixed_micro_batches_bitwise(make_runner, toy_loader, kind, caplog):
    auto = _train(make_runner, toy_loader, ForwardLimit(2), HOOKS[kind]('auto'))
    fixed = _train(make_runner, toy_loader, ToyModel(), HOOKS[kind](2))
    whole = _train(make_runner, toy_loader, ToyModel(), HOOKS[kind](None))
    assert auto.optim_step.micro_batch.size == 2  # 8 → 4 → 2, kept for every later batch
    assert [r.message for r in caplog.records].count(
        "micro_batch='auto': out of memory with a batch of 8 samples at iteration 1; it now "
        'runs as 4 micro-batches of up to 2 samples (the same samples and one update; kept for '
        'the following iterations)') == 1
    assert auto.num_updates == fixed.num_updates
    _assert_equal(_weights(auto), _weights(fixed))
    if kind == 'fp16_skips':  # a skipped step stays skipped: the retry decides nothing anew
        assert auto.optimizer_hook.skipped_steps == fixed.optimizer_hook.skipped_steps == 4
        return
    for k, v in _weights(whole).items():
        torch.testing.assert_close(_weights(auto)[k], v, rtol=0, atol=TOLERANCE[kind])


def test_out_of_memory_in_backward_inside_a_window_leaves_no_partial_gradients(make_runner,
                                                                              toy_loader):
    # fc2's gradient is accumulated before the error: the window's earlier sums must survive
    auto = _train(make_runner, toy_loader, BackwardLimit(3),
                  GradientCumulativeOptimizerHook(cumulative_iters=3, micro_batch='auto'))
    fixed = _train(make_runner, toy_loader, BackwardLimit(3),
                   GradientCumulativeOptimizerHook(cumulative_iters=3, micro_batch=2))
    assert auto.optim_step.micro_batch.size == 2
    _assert_equal(_weights(auto), _weights(fixed))


class Groups:
    """Each step: a tuple of ``k`` batches of the loader (MultiBatchProcessor's input)."""

    def __init__(self, loader, k):
        self.loader, self.k = loader, k

    def __iter__(self):
        return zip(*[iter(self.loader)] * self.k)

    def __len__(self):
        return len(self.loader) // self.k


def test_multi_batch_processor_splits_each_batch(make_runner, toy_loader):
    runs = [_train(make_runner, Groups(toy_loader, 2), model, OptimizerHook(micro_batch=micro),
                   batch_processor=MultiBatchProcessor(loss_reduction='mean'))
            for model, micro in ((ForwardLimit(4), 'auto'), (ToyModel(), 4), (ToyModel(), None))]
    assert runs[0].optim_step.micro_batch.size == 4
    _assert_equal(_weights(runs[0]), _weights(runs[1]))
    for k, v in _weights(runs[2]).items():
        torch.testing.assert_close(_weights(runs[0])[k], v, rtol=0, atol=1e-6)


def test_resume_after_the_split_restores_the_size(make_runner, toy_loader, tmp_path, caplog):
    def run(resume=None):
        runner = make_runner(model=ForwardLimit(2), by_epoch=False, max_len=6, momentum=0.9)
        runner.register_hook(OptimizerHook(micro_batch='auto'))
        runner.register_hook(CheckpointHook(interval=3, by_epoch=False))
        if resume:
            runner.resume(resume)
        caplog.clear()
        runner.run([toy_loader], [('train', 1)])
        return runner, [r.message for r in caplog.records if 'micro_batch=' in r.message]

    full, logged = run()
    assert len(logged) == 1 and 'out of memory' in logged[0]
    ckpt = torch.load(tmp_path / 'iter_3.pth', weights_only=True)
    assert ckpt['hooks']['OptimizerHook']['micro_batch'] == 2
    resumed, logged = run(str(tmp_path / 'iter_3.pth'))
    # no second out-of-memory error: the size came from the checkpoint
    assert logged == ["micro_batch='auto': micro-batches of up to 2 samples, as the "
                      'checkpointed run found']
    assert resumed.optim_step.micro_batch.size == 2
    _assert_equal(_weights(full), _weights(resumed))


@pytest.mark.parametrize('model,where', [(ForwardLimit(2), 'forward'),
                                         (BackwardLimit(2), 'backward')])
def test_off_an_out_of_memory_error_is_one_line_naming_the_batch_and_the_switch(
        make_runner, toy_loader, model, where):
    with pytest.raises(OutOfMemoryStop) as info:
        _train(make_runner, toy_loader, model, OptimizerHook())
    message = str(info.value)
    assert message.startswith(f'out of memory in the {where} of a batch of 8 samples per '
                              'process (CUDA out of memory. Tried to allocate 2.00 GiB')
    assert "micro_batch='auto'" in message and '\n' not in message
    assert isinstance(info.value.__cause__, torch.OutOfMemoryError)


def test_one_sample_that_does_not_fit_fails_with_one_line(make_runner, toy_loader):
    with pytest.raises(OutOfMemoryStop, match=r'^out of memory at iteration 1 even with '
                       r'micro-batches of 1 sample \(a batch of 8\) \(CUDA out of memory'):
        _train(make_runner, toy_loader, ForwardLimit(0), OptimizerHook(micro_batch='auto'))


def test_a_fixed_size_that_does_not_fit_names_auto(make_runner, toy_loader):
    with pytest.raises(OutOfMemoryStop, match=r"micro-batches of 4 samples \(micro_batch=4\).*"
                       r"micro_batch='auto'"):
        _train(make_runner, toy_loader, ForwardLimit(2), OptimizerHook(micro_batch=4))


def test_split_batch_structures():
    Pair = collections.namedtuple('Pair', 'img label')
    batch = {'img': torch.arange(10.).view(5, 2), 'pair': Pair(torch.arange(5), torch.ones(5)),
             'names': list('abcde'), 'scale': torch.tensor(2.), 'epoch': 3,
             'boxes': [torch.zeros(i, 4) for i in range(5)],  # one tensor per image
             'metas': DataContainer([[{'id': i} for i in range(5)]], cpu_only=True),
             'stacked': DataContainer([torch.zeros(5, 3)], stack=True)}
    parts = split_batch(batch, 2)
    assert [n for _, n in parts] == [2, 2, 1]
    last = parts[2][0]
    assert last['img'].tolist() == [[8., 9.]] and last['pair'].img.tolist() == [4]
    assert last['names'] == ['e'] and last['scale'] == 2 and last['epoch'] == 3
    assert [b.shape[0] for b in parts[1][0]['boxes']] == [2, 3]
    assert last['metas'].data == [[{'id': 4}]] and last['metas'].cpu_only
    assert last['stacked'].data[0].shape == (1, 3) and last['stacked'].stack
    assert split_batch(batch, 5) == [(batch, 5)]


def test_a_batch_that_cannot_be_split_fails_with_one_line():
    batch = {'img': torch.zeros(8, 3), 'anchors': torch.zeros(3, 4)}
    with pytest.raises(ConfigError, match=r"optimizer_config.micro_batch.*batch\['anchors'\] has "
                       r'3 rows \(shape \(3, 4\)\) where the batch has 8 samples'):
        split_batch(batch, 4)


def test_micro_batch_values_are_checked():
    with pytest.raises(ValueError, match="micro_batch must be 'auto'"):
        OptimizerHook(micro_batch='half')
    with pytest.raises(ValueError, match="micro_batch must be 'auto'"):
        OptimizerHook(micro_batch=0)


@pytest.mark.parametrize('multi', [False, True])
def test_auto_without_an_out_of_memory_error_changes_nothing(make_runner, toy_loader, multi):
    def run(micro):  # (MultiBatchProcessor: 'mean' over 3 batches divides each loss by 3)
        kwargs = dict(batch_processor=MultiBatchProcessor(loss_reduction='mean')) if multi \
            else {}
        return _train(make_runner, Groups(toy_loader, 3) if multi else toy_loader, ToyModel(),
                      GradientCumulativeOptimizerHook(cumulative_iters=3, micro_batch=micro),
                      **kwargs)

    auto, off = run('auto'), run(None)
    assert auto.optim_step.micro_batch.size is None
    _assert_equal(_weights(auto), _weights(off))


class OwnStepLimit(ForwardLimit):
    """mmcv 1.x's contract: the model's own ``train_step(data, optimizer)`` makes the outputs."""

    def train_step(self, data, optimizer):
        loss, log_vars = parse_losses(self(**data))
        return dict(loss=loss, log_vars=log_vars, num_samples=len(data['img']))


def test_a_model_with_its_own_train_step_is_called_per_micro_batch(make_runner, toy_loader):
    auto = _train(make_runner, toy_loader, OwnStepLimit(2), OptimizerHook(micro_batch='auto'))
    fixed = _train(make_runner, toy_loader, OwnStepLimit(8), OptimizerHook(micro_batch=2))
    whole = _train(make_runner, toy_loader, OwnStepLimit(8), OptimizerHook())
    assert auto.optim_step.micro_batch.size == 2
    _assert_equal(_weights(auto), _weights(fixed))
    for k, v in _weights(whole).items():
        torch.testing.assert_close(_weights(auto)[k], v, rtol=0, atol=1e-6)
