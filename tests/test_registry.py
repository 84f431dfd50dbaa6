"""Registries: mmengine children, lookups, and build errors that name the key."""

import pytest
import torch

from mtrain.registry import (BATCH_PROCESSORS, DATASETS, HOOKS, MODEL_WRAPPERS, MODELS,
                             OPTIMIZER_CONSTRUCTORS, OPTIMIZERS, RUNNERS, TRANSFORMS, build,
                             registered_names)
from mtrain.utils import ConfigError


def test_registries_are_mtrain_scoped_children_of_mmengine_roots():
    from mmengine import registry as mme
    pairs = [(MODELS, mme.MODELS), (DATASETS, mme.DATASETS), (TRANSFORMS, mme.TRANSFORMS),
             (OPTIMIZERS, mme.OPTIMIZERS), (HOOKS, mme.HOOKS), (RUNNERS, mme.RUNNERS),
             (MODEL_WRAPPERS, mme.MODEL_WRAPPERS)]
    for ours, root in pairs:
        assert ours.scope == 'mtrain' and ours.parent is root
    assert BATCH_PROCESSORS.scope == OPTIMIZER_CONSTRUCTORS.scope == 'mtrain'


def test_every_registry_finds_its_own_classes():
    assert build(dict(type='LeNet'), MODELS, 'model').__class__.__name__ == 'LeNet'
    assert 'EpochBasedRunner' in registered_names(RUNNERS)
    assert 'BasicBatchProcessor' in registered_names(BATCH_PROCESSORS)
    assert 'ModelWrapper' in registered_names(MODEL_WRAPPERS)
    assert 'CheckpointHook' in registered_names(HOOKS)


def test_unknown_type_names_registry_key_path_and_closest_names():
    with pytest.raises(ConfigError) as err:
        build(dict(type='LeNett'), MODELS, 'model')
    msg = str(err.value)
    assert 'model.type' in msg and "'LeNett'" in msg and "'LeNet'" in msg
    assert 'MODEL' in msg and 'custom_imports' in msg


def test_unknown_argument_names_the_key_and_the_closest_accepted_one():
    with pytest.raises(ConfigError) as err:
        build(dict(type='CheckpointHook', intervall=1), HOOKS, 'checkpoint_config')
    msg = str(err.value)
    assert 'checkpoint_config.intervall' in msg and "'interval'" in msg


def test_value_errors_from_constructors_name_the_key():
    with pytest.raises(ConfigError) as err:
        build(dict(type='CheckpointHook', interval=0), HOOKS, 'checkpoint_config')
    assert 'checkpoint_config' in str(err.value) and 'positive integer' in str(err.value)


def test_missing_type_and_non_dict_are_clear():
    with pytest.raises(ConfigError, match='has no `type`'):
        build(dict(lr=0.1), OPTIMIZERS, 'optimizer')
    with pytest.raises(ConfigError, match='expected a dict'):
        build(['LeNet'], MODELS, 'model')


def test_default_args_fill_only_missing_keys():
    hook = build(dict(type='TextLoggerHook', interval=5), HOOKS, 'log_config.hooks.0',
                 default_args=dict(interval=50))
    assert hook.interval == 5


def test_a_class_can_be_given_instead_of_a_name():
    assert isinstance(build(dict(type=torch.nn.Linear, in_features=2, out_features=3),
                            MODELS, 'model'), torch.nn.Linear)
