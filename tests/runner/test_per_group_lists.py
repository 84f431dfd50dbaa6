"""A 1.x schedule that lists one value per param group keeps mmcv's groups, one per parameter."""

import logging
import os

import pytest

from mtrain.config import load_config
from mtrain.runner import build_runner

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _digits(**options):
    config = os.path.join(ROOT, 'configs', 'digits', 'lenet_digits.py')
    return load_config(config, dict({'runner.max_epochs': 1, 'data.samples_per_gpu': 512,
                                     'evaluation': None, 'optimizer.paramwise_cfg':
                                     dict(bias_lr_mult=2.)}, **options))


def test_a_one_cycle_max_lr_list_lands_on_the_parameter_it_was_written_for(tmp_path):
    probe, _, _ = build_runner(_digits(), str(tmp_path / 'probe'), logging.getLogger('t'))
    names = [n for n, _ in probe.model_wrapper.module.named_parameters()]
    assert len(probe.optimizer.param_groups) == 2  # merged: weights, biases
    max_lr = [0.01 * (i + 1) for i in range(len(names))]
    cfg = _digits(lr_config=dict(_delete_=True, policy='OneCycle', max_lr=max_lr,
                                         div_factor=25.))
    runner, loaders, workflow = build_runner(cfg, str(tmp_path), logging.getLogger('t'))
    groups = runner.optimizer.param_groups
    assert len(groups) == len(names)  # as mmcv 1.7.2 builds them under paramwise_cfg
    runner.run(loaders, workflow)
    params = dict(runner.model_wrapper.module.named_parameters())
    for name, group, peak in zip(names, groups, max_lr):
        assert group['params'][0] is params[name]
        assert group['initial_lr'] == pytest.approx(peak / 25.)  # mmcv: max_lr / div_factor


def test_an_explicit_merge_groups_is_kept(tmp_path):
    cfg = _digits(lr_config=dict(_delete_=True, policy='OneCycle', max_lr=[0.1, 0.2]))
    cfg.optimizer.paramwise_cfg.merge_groups = True
    runner, _, _ = build_runner(cfg, str(tmp_path), logging.getLogger('t'))
    assert len(runner.optimizer.param_groups) == 2


def test_a_step_policys_milestones_keep_merging_on(tmp_path, caplog):
    """Issue 33 item 7: ``step=[6, 8]`` is no per-group list; merging stays on, no false reason."""
    cfg = _digits(lr_config=dict(_delete_=True, policy='step', step=[6, 8]))
    with caplog.at_level(logging.INFO):
        runner, _, _ = build_runner(cfg, str(tmp_path), logging.getLogger('t'))
    assert len(runner.optimizer.param_groups) == 2  # weights, biases: merged
    assert 'one value per param group' not in caplog.text
