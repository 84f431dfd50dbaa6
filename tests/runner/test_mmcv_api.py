"""mmcv 1.x's runner API, name by name: constructor, checks, register_*, checkpoints, lr.

Each expected value is what mmcv 1.7.2's ``BaseRunner`` / ``EpochBasedRunner``
does with the same call (read from its source).
"""

import logging
import os
import subprocess
import sys

import pytest
import torch

from mtrain.hooks import (CheckpointHook, IterTimerHook, OptimizerHook, ProfilerHook,
                          StepLrUpdaterHook, StepMomentumUpdaterHook, TextLoggerHook)
from mtrain.processors import parse_losses
from mtrain.runner import CheckpointError, EpochBasedRunner, IterBasedRunner
from mtrain.runner.checkpoint import save_checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _sgd(model, momentum=0.9):
    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=momentum)


def test_constructor_takes_mmcvs_positional_order(toy_model, tmp_path, logger):
    optimizer = _sgd(toy_model)
    runner = EpochBasedRunner(toy_model, None, optimizer, str(tmp_path), logger, dict(seed=1),
                              None, 3)
    assert (runner.optimizer, runner.work_dir, runner.logger) == (optimizer, str(tmp_path), logger)
    assert (runner.meta['seed'], runner.max_iters, runner.max_epochs) == (1, None, 3)
    assert IterBasedRunner(toy_model, None, optimizer, None, logger, None, 5).max_iters == 5


@pytest.mark.parametrize('kwargs, error, message', [
    (dict(batch_processor=3), TypeError, 'batch_processor must be callable'),
    (dict(optimizer=dict(g=3)), TypeError, 'optimizer\\["g"\\] is a'),
    (dict(optimizer='SGD'), TypeError, 'torch.optim.Optimizer object or dict or None'),
    (dict(logger=print), TypeError, 'logger must be a logging.Logger'),
    (dict(meta=[1]), TypeError, 'meta must be a dict or None'),
    (dict(work_dir=3), TypeError, '"work_dir" must be a str or None'),
    (dict(max_epochs=1, max_iters=1), ValueError, 'Only one of `max_epochs` or `max_iters`'),
])
def test_constructor_checks_as_mmcv(toy_model, kwargs, error, message):
    with pytest.raises(error, match=message):
        EpochBasedRunner(toy_model, **kwargs)


def test_a_batch_processor_function_beside_train_step_is_refused(toy_model):
    with_step = type('WithStep', (type(toy_model), ), {'train_step': lambda self, d, o: {}})
    with pytest.raises(RuntimeError, match='cannot be both available'):
        EpochBasedRunner(with_step(), batch_processor=lambda model, data, train_mode: {})


def test_an_mmcv_batch_processor_function_trains_like_the_default(make_runner, toy_loader,
                                                                  toy_model):
    def batch_processor(model, data, train_mode, **kwargs):
        loss, log_vars = parse_losses(model(**data))
        return dict(loss=loss, log_vars=log_vars, num_samples=len(data['img']))

    runners = []
    for processor in (batch_processor, None):
        runner = make_runner(type(toy_model)(), batch_processor=processor)
        runner.register_training_hooks(optimizer_config={}, timer_config=None)
        runner.run([toy_loader], [('train', 1)])
        runners.append(runner)
    for name, value in runners[1].model.state_dict().items():
        assert torch.equal(runners[0].model.state_dict()[name], value)


def test_register_hooks_one_by_one_at_mmcvs_priorities(make_runner):
    runner = make_runner()
    runner.register_lr_hook(dict(policy='step', step=[1]))
    runner.register_momentum_hook(dict(policy='step', step=[1], gamma=0.5))
    runner.register_optimizer_hook(dict(grad_clip=None))
    runner.register_checkpoint_hook(dict(interval=1))
    runner.register_timer_hook(dict(type='IterTimerHook'))
    runner.register_logger_hooks(dict(interval=5, hooks=[dict(type='TextLoggerHook')]))
    runner.register_profiler_hook(dict(num_iters=1))
    runner.register_hook_from_cfg(dict(type='CheckpointHook', priority='HIGHEST', interval=2))
    runner.register_custom_hooks([dict(type='IterTimerHook', priority=60)])
    for nothing in (runner.register_lr_hook, runner.register_momentum_hook,
                    runner.register_optimizer_hook, runner.register_checkpoint_hook,
                    runner.register_timer_hook, runner.register_logger_hooks,
                    runner.register_custom_hooks, runner.register_profiler_hook):
        nothing(None)
    got = [(type(h), h.priority) for h in runner.hooks]
    # mmcv's, except ProfilerHook: LOWEST (mmcv: NORMAL), so its window ends after the step
    assert got == [(CheckpointHook, 0), (StepLrUpdaterHook, 10), (StepMomentumUpdaterHook, 30),
                   (OptimizerHook, 40), (CheckpointHook, 50), (IterTimerHook, 60),
                   (IterTimerHook, 70), (TextLoggerHook, 90), (ProfilerHook, 100)]
    assert runner.hooks[0].interval == 2 and runner.hooks[-2].interval == 5


def test_checkpoint_numbering_meta_and_arguments(make_runner, toy_loader, tmp_path):
    runner = make_runner(max_len=2)
    runner.register_training_hooks(optimizer_config={}, checkpoint_config=dict(interval=1),
                                   timer_config=None)
    runner.run([toy_loader], [('train', 1)])
    assert sorted(os.listdir(tmp_path)) == ['epoch_1.pth', 'epoch_2.pth', 'latest.pth']
    first = torch.load(tmp_path / 'epoch_1.pth', weights_only=True)
    assert (first['meta']['epoch'], first['meta']['iter']) == (1, 8)  # mmcv: epoch + 1, iter
    path = runner.save_checkpoint(str(tmp_path / 'x'), filename_tmpl='ckpt_{}.pth',
                                  save_optimizer=False, meta=dict(note='final'),
                                  create_symlink=False)
    ckpt = torch.load(path, weights_only=True)
    # mmcv: filename_tmpl.format(runner.epoch + 1); the run ended at epoch 2
    assert os.listdir(tmp_path / 'x') == ['ckpt_3.pth'] and 'optimizer' not in ckpt
    assert ckpt['meta']['note'] == 'final'
    with pytest.raises(TypeError, match='meta should be a dict or None'):
        runner.save_checkpoint(str(tmp_path), meta='final')


@pytest.mark.parametrize('optim_cls, kwargs, momentum', [
    (torch.optim.SGD, dict(momentum=0.9), 0.9), (torch.optim.Adam, dict(betas=(0.8, 0.9)), 0.8),
    (torch.optim.Adagrad, {}, 0)])
def test_current_lr_and_momentum(toy_model, logger, optim_cls, kwargs, momentum):
    optimizer = optim_cls(toy_model.parameters(), lr=0.05, **kwargs)
    runner = EpochBasedRunner(toy_model, optimizer=optimizer, logger=logger)
    assert (runner.current_lr(), runner.current_momentum()) == ([0.05], [momentum])
    with pytest.raises(RuntimeError, match='lr is not applicable'):
        EpochBasedRunner(toy_model, logger=logger).current_lr()


def test_resume_an_mmcv_written_checkpoint(make_runner, toy_loader, toy_model, tmp_path):
    """mmcv's file: meta epoch/iter, no progress; resume continues at the next epoch."""
    path = str(tmp_path / 'mmcv_epoch_1.pth')
    optimizer = _sgd(toy_model)
    save_checkpoint(toy_model, path, optimizer=optimizer,
                    meta=dict(epoch=1, iter=8, hook_msgs=dict(best_score=0.7)))
    runner = make_runner(type(toy_model)(), max_len=2)
    runner.register_training_hooks(optimizer_config={}, timer_config=None)
    runner.resume(path)
    assert (runner.epoch, runner.iter, runner.meta['hook_msgs']) == (1, 8, dict(best_score=0.7))
    runner.run([toy_loader], [('train', 1)])
    assert (runner.epoch, runner.iter) == (2, 16)


def test_resume_takes_the_checkpoints_meta_as_mmcv(make_runner, toy_model, tmp_path):
    """mmcv 1.7.2's ``resume``: ``self.meta = checkpoint['meta']`` (a 1.x hook's keys too)."""
    path = str(tmp_path / 'epoch_1.pth')
    saved = dict(epoch=1, iter=8, seed=0, fp16=dict(loss_scaler=dict(scale=512.)))
    save_checkpoint(toy_model, path, optimizer=_sgd(toy_model), meta=saved)
    runner = make_runner(type(toy_model)(), max_len=2, meta=dict(seed=1, exp_name='resumed'))
    runner.resume(path)
    # Was: the runner's own meta plus the checkpoint's hook_msgs ({'seed': 1, ...}).
    assert runner.meta == saved


def test_load_from_fine_tunes_and_resume_is_strict(make_runner, toy_model, tmp_path, caplog):
    path = str(tmp_path / 'other_head.pth')
    other = type(toy_model)()
    other.fc2 = torch.nn.Linear(8, 5)  # another num_classes
    save_checkpoint(other, path)
    runner = make_runner(type(toy_model)())
    with caplog.at_level(logging.WARNING, logger='mtrain.test'):
        runner.load_checkpoint(path)
    assert 'fc2.weight: checkpoint (5, 8), model (3, 8)' in caplog.text
    assert torch.equal(runner.model_wrapper.module.fc1.weight, other.fc1.weight)
    with pytest.raises(CheckpointError, match='(?s)does not fit the model.*fc2.bias.*use load_from'):
        runner.resume(path)


def test_mtrain_exports_mmcv_runner_names_lazily():
    script = ('import sys, mtrain; lazy = "torch" not in sys.modules\n'
              'from mtrain import (BaseRunner, EpochBasedRunner, IterBasedRunner, Runner, Hook, '
              'HOOKS, OptimizerHook, CheckpointHook, build_optimizer, save_checkpoint, '
              'load_checkpoint, load_state_dict, weights_to_cpu, get_dist_info, init_dist, '
              'master_only, MMDataParallel, MMDistributedDataParallel, is_module_wrapper, '
              '_load_checkpoint_with_prefix, OPTIMIZER_BUILDERS, LrUpdaterHook, Priority, '
              'get_priority, IterLoader, LogBuffer, allreduce_grads)\n'
              'assert Runner is EpochBasedRunner\n'
              'print(lazy)')
    result = subprocess.run([sys.executable, '-c', script], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == 'True'  # `import mtrain` alone imports no torch


def test_iter_runner_defaults_hooks_to_by_epoch_false_as_mmcv(make_runner):
    runner = make_runner(by_epoch=False, max_len=4)
    checkpoint_config, lr_config = dict(interval=2), dict(policy='step', step=[2])
    log_config = dict(interval=1, hooks=[dict(type='TextLoggerHook')])
    runner.register_training_hooks(lr_config=lr_config, checkpoint_config=checkpoint_config,
                                   log_config=log_config, timer_config=None)
    assert [(type(h).__name__, h.by_epoch) for h in runner.hooks] == [
        ('StepLrUpdaterHook', False), ('CheckpointHook', False), ('TextLoggerHook', False)]
    assert 'by_epoch' not in checkpoint_config and 'by_epoch' not in log_config['hooks'][0]
    epoch_runner = make_runner()
    epoch_runner.register_checkpoint_hook(dict(interval=2))
    assert epoch_runner.hooks[0].by_epoch
