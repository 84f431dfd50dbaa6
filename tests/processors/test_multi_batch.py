"""MultiBatchProcessor: the update is the sum (or mean) of all batches' gradients, exactly."""

import copy
from contextlib import contextmanager

import pytest
import torch
from torch import nn

from mtrain.hooks import Fp16OptimizerHook, GradientCumulativeOptimizerHook, Hook, OptimizerHook
from mtrain.parallel import ModelWrapper
from mtrain.processors import BasicBatchProcessor, MultiBatchProcessor
from mtrain.processors.multi_batch import split_batches, task_name_of
from mtrain.registry import BATCH_PROCESSORS, build
from mtrain.utils import ConfigError



def _params(runner):
    return [p.detach().clone() for p in runner.model_wrapper.module.parameters()]


def _batches(dataset, size, count):
    """``count`` consecutive batches of ``size`` samples, in dataset order."""
    return [{'img': dataset.x[i * size:(i + 1) * size],
             'gt_label': dataset.y[i * size:(i + 1) * size]} for i in range(count)]


def _slices(batch, k):
    """A batch cut into a tuple of ``k`` equal slices."""
    n = len(batch['gt_label']) // k
    return tuple({key: value[i * n:(i + 1) * n] for key, value in batch.items()}
                 for i in range(k))


class TaskAware(nn.Module):
    """The toy model, accepting (and ignoring) the batch's task name."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, img, gt_label=None, task_name=None):
        return self.model(img, gt_label)


class Recorder(Hook):
    """Every inner point, with the batch being processed."""

    priority = 'LOWEST'
    stages = ('before_forward', 'after_forward', 'before_backward', 'after_backward')

    def __init__(self):
        self.calls = []

    def _record(self, stage, runner):
        current = getattr(runner.batch_processor, 'current', None)
        self.calls.append((stage, None if current is None else current.index))

    def before_forward(self, runner):
        self._record('before_forward', runner)

    def after_forward(self, runner):
        current = getattr(runner.batch_processor, 'current', None)
        assert current is None or current.output is not None
        self._record('after_forward', runner)

    def before_backward(self, runner):
        self._record('before_backward', runner)

    def after_backward(self, runner):
        self._record('after_backward', runner)

    def before_optimizer_step(self, runner):
        self.calls.append(('before_optimizer_step', None))

    def after_train_iter(self, runner):
        self.calls.append(('after_train_iter', None))


@pytest.mark.parametrize('k', [2, 4])
def test_mean_over_k_slices_equals_the_whole_batch(make_runner, toy_dataset, k):
    whole = _batches(toy_dataset, 16, 4)
    sliced = [_slices(b, k) for b in whole]
    basic = make_runner(by_epoch=True, max_len=2, lr=0.2, momentum=0.9)
    basic.register_hook(OptimizerHook())
    basic.run([whole], [('train', 1)])
    multi = make_runner(by_epoch=True, max_len=2, lr=0.2, momentum=0.9,
                        batch_processor=MultiBatchProcessor(loss_reduction='mean'))
    multi.register_hook(OptimizerHook())
    multi.run([sliced], [('train', 1)])
    assert basic.num_updates == multi.num_updates == 8
    for a, b in zip(_params(multi), _params(basic)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


def test_sum_updates_with_the_sum_of_every_slices_gradient(make_runner, toy_dataset):
    step = _slices(_batches(toy_dataset, 24, 1)[0], 3)
    runner = make_runner(by_epoch=False, max_len=1, lr=1.0,
                         batch_processor=MultiBatchProcessor(loss_reduction='sum'))
    grads_per_slice = []
    for piece in step:
        model = copy.deepcopy(runner.model_wrapper.module)
        model(**piece)['loss_cls'].backward()
        grads_per_slice.append([p.grad for p in model.parameters()])
    expected = [sum(gs) for gs in zip(*grads_per_slice)]
    before = _params(runner)
    runner.register_hook(OptimizerHook())
    runner.run([[step]], [('train', 1)])
    for new, old, grad, last in zip(_params(runner), before, expected, grads_per_slice[-1]):
        torch.testing.assert_close(old - new, grad, rtol=0, atol=1e-6)  # lr=1: the step is Σ g
        assert not torch.allclose(grad, last)  # ... and not the last slice's gradient


def test_inner_hook_points_in_order(make_runner, toy_dataset):
    step = _slices(_batches(toy_dataset, 8, 1)[0], 2)
    runner = make_runner(by_epoch=False, max_len=1, batch_processor=MultiBatchProcessor())
    runner.register_hook(OptimizerHook())
    recorder = Recorder()
    runner.register_hook(recorder)
    runner.run([[step]], [('train', 1)])
    per_batch = ['before_forward', 'after_forward', 'before_backward', 'after_backward']
    assert recorder.calls == [(s, 0) for s in per_batch] + [(s, 1) for s in per_batch] + [
        ('before_optimizer_step', None), ('after_train_iter', None)]
    assert runner.batch_processor.current is None  # no reference to the last graph is kept


def test_basic_processor_calls_the_same_points(make_runner, toy_loader):
    runner = make_runner(by_epoch=False, max_len=1)
    runner.register_hook(OptimizerHook())
    recorder = Recorder()
    runner.register_hook(recorder)
    runner.run([toy_loader], [('train', 1)])
    assert [c[0] for c in recorder.calls] == [
        'before_forward', 'after_forward', 'before_backward', 'after_backward',
        'before_optimizer_step', 'after_train_iter']


def test_per_task_losses_are_logged_under_the_task_name(make_runner, toy_dataset, toy_model):
    low, high = _batches(toy_dataset, 8, 2)
    low['task_name'] = ['vehicle'] * 8  # what a loader collates from per-sample names
    high['task_name'] = 'person'
    runner = make_runner(by_epoch=False, max_len=1, model=TaskAware(toy_model),
                         batch_processor=MultiBatchProcessor())
    runner.register_hook(OptimizerHook())
    runner.run([[(low, high)]], [('train', 1)])
    log_vars = runner.outputs['log_vars']
    assert {'vehicle.loss_cls', 'vehicle.acc', 'person.loss_cls', 'person.acc', 'loss'} <= \
        set(log_vars)
    assert runner.outputs['num_samples'] == 16
    torch.testing.assert_close(log_vars['loss'],
                               log_vars['vehicle.loss_cls'] + log_vars['person.loss_cls'])


def test_unnamed_slices_log_mean_metrics_and_the_reduced_loss(make_runner, toy_dataset):
    whole = _batches(toy_dataset, 16, 1)[0]
    runner = make_runner(by_epoch=False, max_len=1, lr=0.0,
                         batch_processor=MultiBatchProcessor(loss_reduction='mean'))
    reference = copy.deepcopy(runner.model_wrapper.module)(**whole)
    runner.register_hook(OptimizerHook())
    runner.run([[_slices(whole, 2)]], [('train', 1)])
    log_vars = runner.outputs['log_vars']
    torch.testing.assert_close(log_vars['loss'], reference['loss_cls'].detach())
    torch.testing.assert_close(log_vars['acc'], reference['acc'])


def test_gradient_accumulation_counts_updates_not_batches(make_runner, toy_dataset):
    whole = _batches(toy_dataset, 16, 4)
    big = [{k: torch.cat([a[k], b[k]]) for k in a} for a, b in zip(whole[::2], whole[1::2])]
    basic = make_runner(by_epoch=False, max_len=2, lr=0.2)
    basic.register_hook(OptimizerHook())
    basic.run([big], [('train', 1)])
    multi = make_runner(by_epoch=False, max_len=4, lr=0.2,
                        batch_processor=MultiBatchProcessor(loss_reduction='mean'))
    multi.register_hook(GradientCumulativeOptimizerHook(cumulative_iters=2))
    multi.run([[_slices(b, 2) for b in whole]], [('train', 1)])
    assert multi.num_updates == 2 and multi.iter == 4
    for a, b in zip(_params(multi), _params(basic)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


class SyncRecorder(ModelWrapper):
    """A single-process wrapper that records which batches ran under no_sync()."""

    def __init__(self, module):
        super().__init__(module)
        self.events = []

    @contextmanager
    def no_sync(self):
        self.events.append('no_sync')
        yield

    def train_step(self, batch):
        self.events.append('forward')
        return super().train_step(batch)


def test_no_sync_for_all_but_the_synchronised_backward(make_runner, toy_dataset, toy_model):
    step = _slices(_batches(toy_dataset, 12, 1)[0], 3)
    wrapper = SyncRecorder(toy_model)
    runner = make_runner(by_epoch=False, max_len=1, model=wrapper,
                         batch_processor=MultiBatchProcessor())
    runner.register_hook(OptimizerHook())
    runner.run([[step]], [('train', 1)])
    # DDP all-reduces during the last backward of the step, overlapped with it
    assert wrapper.events == ['no_sync', 'forward', 'no_sync', 'forward', 'forward']


def test_accumulation_micro_steps_sync_only_in_the_last_backward(make_runner, toy_dataset,
                                                                  toy_model):
    steps = [_slices(b, 2) for b in _batches(toy_dataset, 8, 2)]
    wrapper = SyncRecorder(toy_model)
    runner = make_runner(by_epoch=False, max_len=2, model=wrapper,
                         batch_processor=MultiBatchProcessor())
    runner.register_hook(GradientCumulativeOptimizerHook(cumulative_iters=2))
    runner.run([steps], [('train', 1)])
    assert wrapper.events == ['no_sync', 'forward'] * 3 + ['forward']


def test_an_inf_in_one_batch_under_fp16_skips_the_whole_step(make_runner, toy_dataset):
    step = _slices(_batches(toy_dataset, 16, 1)[0], 2)

    class InjectInfInFirstBatch(Hook):
        def after_backward(self, runner):
            if runner.batch_processor.current.index == 0:
                runner.model_wrapper.module.fc1.weight.grad[0, 0] = float('inf')

    runner = make_runner(by_epoch=False, max_len=1, batch_processor=MultiBatchProcessor())
    before = _params(runner)
    runner.register_hook(Fp16OptimizerHook(loss_scale=512.))
    runner.register_hook(InjectInfInFirstBatch())
    runner.run([[step]], [('train', 1)])
    assert runner.num_updates == 0 and runner.optimizer_hook.skipped_steps == 1
    for a, b in zip(_params(runner), before):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_batch_transforms_and_a_custom_loss_collector(make_runner, toy_dataset):
    step = _slices(_batches(toy_dataset, 8, 1)[0], 2)
    seen = []

    def double_images(batch):
        return dict(batch, img=batch['img'] * 2)

    def collector(output):
        seen.append(sorted(output))
        return output['loss_cls'] * 0, {'loss_seen': output['loss_cls'].detach()}

    runner = make_runner(by_epoch=False, max_len=1, lr=1.0, batch_processor=MultiBatchProcessor(
        batch_transforms=[double_images], loss_collector=collector))
    before = _params(runner)
    runner.register_hook(OptimizerHook())
    runner.run([[step]], [('train', 1)])
    assert seen == [['acc', 'loss_cls']] * 2
    for a, b in zip(_params(runner), before):  # the collector's zero loss: no update
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    model = copy.deepcopy(runner.model_wrapper.module)
    expected = sum(model(img=p['img'] * 2, gt_label=p['gt_label'])['loss_cls'] for p in step)
    log_vars = runner.outputs['log_vars']
    torch.testing.assert_close(log_vars['loss_seen'], expected.detach())  # 'sum' of both
    assert log_vars['loss'].item() == 0  # 'loss' is what was backpropagated


def test_a_collector_by_import_path():
    processor = MultiBatchProcessor(loss_collector='mtrain.processors.losses:parse_losses')
    loss, log_vars = processor.loss_collector({'loss_a': torch.tensor(2.)})
    assert loss.item() == 2. and log_vars['loss'].item() == 2.


def test_eval_mode_with_one_batch_is_the_basic_processor(make_runner, toy_dataset):
    batch = _batches(toy_dataset, 8, 1)[0]
    runner = make_runner(by_epoch=False, max_len=1, batch_processor=MultiBatchProcessor())
    runner.model.eval()
    with torch.no_grad():
        multi = MultiBatchProcessor()(runner, batch, train_mode=False)
        basic = BasicBatchProcessor()(runner, batch, train_mode=False)
    torch.testing.assert_close(multi['predictions'], basic['predictions'])


def test_what_counts_as_several_batches():
    a, b = {'img': torch.zeros(2)}, {'img': torch.ones(2)}
    assert split_batches((a, b)) == [a, b]
    assert split_batches([a, b]) == [[a, b]]  # a list is one batch (a collated tuple sample)
    assert task_name_of({'task_name': ['x', 'x']}) == 'x'
    assert task_name_of({'task_name': ['x', 'y']}) is None  # mixed: logged without a name


@pytest.mark.parametrize('cfg, match', [
    (dict(loss_reduction='avg'), "'sum' or 'mean'"),
    (dict(ddp_sync='explicit'), "does not accept the argument 'ddp_sync'"),
    (dict(batch_transforms=[dict(type='Resize')]), 'must be callable'),
    (dict(loss_collector='no.such.module:fn'), 'could not be imported'),
])
def test_bad_arguments_are_config_errors(cfg, match):
    with pytest.raises(ConfigError, match=match):
        build(dict(type='MultiBatchProcessor', **cfg), BATCH_PROCESSORS, 'batch_processor')


def test_without_an_optimizer_hook_it_says_what_to_add(make_runner, toy_dataset):
    step = _slices(_batches(toy_dataset, 8, 1)[0], 2)
    runner = make_runner(by_epoch=False, max_len=1, batch_processor=MultiBatchProcessor())
    with pytest.raises(RuntimeError, match='optimizer_config'):
        runner.run([[step]], [('train', 1)])
