"""mmcv 1.x's Registry contract on mtrain: parents across packages, scopes, build_func."""

import sys
import textwrap
import uuid

import pytest
from mmengine.registry import Registry as MMEngineRegistry

from mtrain.compat import Registry, build_from_cfg
from mtrain.registry import HOOKS, OPTIMIZER_CONSTRUCTORS, build


@pytest.fixture
def downstream_package(tmp_path, monkeypatch):
    """A fresh importable package ``pkg_<hex>`` whose ``__init__`` is the given source.

    The registries it hangs under mtrain's global ones are detached afterwards.
    """
    made = []

    def make(source: str):
        name = f'pkg_{uuid.uuid4().hex[:8]}'
        (tmp_path / name).mkdir()
        (tmp_path / name / '__init__.py').write_text(textwrap.dedent(source))
        monkeypatch.syspath_prepend(str(tmp_path))
        module = __import__(name)
        made.append(name)
        return module

    yield make
    for name in made:
        for registry in (OPTIMIZER_CONSTRUCTORS, HOOKS):
            registry.children.pop(name, None)
        sys.modules.pop(name, None)


LAYER_DECAY = '''
    from mtrain.compat import Registry, build_from_cfg
    from mtrain.optim import DefaultOptimizerConstructor
    from mtrain.registry import OPTIMIZER_CONSTRUCTORS as MMCV_OPTIMIZER_BUILDERS

    OPTIMIZER_BUILDERS = Registry('optimizer builder', parent=MMCV_OPTIMIZER_BUILDERS)

    @OPTIMIZER_BUILDERS.register_module()
    class LayerDecayConstructor(DefaultOptimizerConstructor):
        pass

    def build_optimizer_constructor(cfg):   # mmseg 0.x's function, word for word in spirit
        if cfg['type'] in OPTIMIZER_BUILDERS:
            return build_from_cfg(cfg, OPTIMIZER_BUILDERS)
        if cfg['type'] in MMCV_OPTIMIZER_BUILDERS:
            return build_from_cfg(cfg, MMCV_OPTIMIZER_BUILDERS)
        raise KeyError(cfg['type'])
'''


def test_child_of_an_mtrain_registry_takes_the_creating_package_as_scope(downstream_package):
    pkg = downstream_package(LAYER_DECAY)
    child = pkg.OPTIMIZER_BUILDERS
    assert child.scope == pkg.__name__
    assert child.parent is OPTIMIZER_CONSTRUCTORS
    assert OPTIMIZER_CONSTRUCTORS.children[pkg.__name__] is child
    assert child.build_func is OPTIMIZER_CONSTRUCTORS.build_func  # inherited, as mmcv


def test_both_directions_resolve_and_build(downstream_package):
    pkg = downstream_package(LAYER_DECAY)
    cfg = dict(optimizer_cfg=dict(type='SGD', lr=0.1))
    # mmseg's dispatch: its own registry first, then mmcv's (here: mtrain's).
    own = pkg.build_optimizer_constructor(dict(type='LayerDecayConstructor', **cfg))
    assert type(own) is pkg.LayerDecayConstructor
    default = pkg.build_optimizer_constructor(dict(type='DefaultOptimizerConstructor', **cfg))
    assert type(default).__name__ == 'DefaultOptimizerConstructor'
    # mtrain's builder (an mmengine registry) finds the child's class by its scope ...
    scoped = f'{pkg.__name__}.LayerDecayConstructor'
    assert type(build(dict(type=scoped, **cfg), OPTIMIZER_CONSTRUCTORS, 'optimizer')) \
        is pkg.LayerDecayConstructor
    # ... and the child reaches mtrain's classes through the root by theirs.
    assert pkg.OPTIMIZER_BUILDERS.get('mtrain.DefaultOptimizerConstructor') is not None


def test_unscoped_lookup_stays_in_the_registry_as_in_mmcv(downstream_package):
    pkg = downstream_package(LAYER_DECAY)
    # mmcv 1.x: a child does not fall back to its parent for a bare name.
    assert pkg.OPTIMIZER_BUILDERS.get('DefaultOptimizerConstructor') is None
    assert 'DefaultOptimizerConstructor' not in pkg.OPTIMIZER_BUILDERS
    assert pkg.OPTIMIZER_BUILDERS.get(f'{pkg.__name__}.LayerDecayConstructor') \
        is pkg.LayerDecayConstructor


def test_scoped_names_between_siblings_go_through_the_root():
    models = Registry('model', scope='root_a')
    cls_models = Registry('model', parent=models, scope='cls_a')
    seg_models = Registry('model', parent=models, scope='seg_a')

    @cls_models.register_module()
    class ResNet:
        pass

    assert models.get('cls_a.ResNet') is ResNet
    assert seg_models.get('cls_a.ResNet') is ResNet  # sibling, via the root
    assert seg_models.get('ResNet') is None
    assert models.get('nowhere.ResNet') is None  # mmcv raises AttributeError here
    assert models.build(dict(type='cls_a.ResNet')).__class__ is ResNet


def test_build_func_is_used_and_inherited():
    calls = []

    def build_model(cfg, registry, default_args=None):
        calls.append(registry.name)
        if isinstance(cfg, list):
            return [build_from_cfg(c, registry, default_args) for c in cfg]
        return build_from_cfg(cfg, registry, default_args)

    root = Registry('model', build_func=build_model, scope='root_b')
    child = Registry('backbone', parent=root, scope='child_b')

    @child.register_module()
    class Net:
        def __init__(self, depth=1):
            self.depth = depth

    nets = child.build([dict(type='Net', depth=2), dict(type='Net')])
    assert [n.depth for n in nets] == [2, 1] and calls == ['backbone']
    assert child.build_func is build_model


def test_mmengine_registry_may_hang_under_a_compat_one():
    root = Registry('hook', scope='root_c')
    leaf = MMEngineRegistry('hook', parent=root, scope='leaf_c')

    @leaf.register_module()
    class MyHook:
        pass

    assert leaf.build_func is root.build_func is build_from_cfg
    assert root.get('leaf_c.MyHook') is MyHook
    assert isinstance(build_from_cfg(dict(type='leaf_c.MyHook'), root), MyHook)


def test_build_from_cfg_on_mtrain_registries_keeps_mmcv_errors():
    hook = build_from_cfg(dict(type='CheckpointHook'), HOOKS, default_args=dict(interval=3))
    assert hook.interval == 3
    assert type(build_from_cfg(dict(interval=2), HOOKS,
                               default_args=dict(type='CheckpointHook'))).__name__ \
        == 'CheckpointHook'
    with pytest.raises(KeyError, match="CheckpointHok is not in the hook registry.*"
                                       "'CheckpointHook'"):
        build_from_cfg(dict(type='CheckpointHok'), HOOKS)
    with pytest.raises(TypeError, match='cfg must be a dict'):
        build_from_cfg('CheckpointHook', HOOKS)
    with pytest.raises(TypeError, match='registry must be'):
        build_from_cfg(dict(type='CheckpointHook'), {'CheckpointHook': object})
    with pytest.raises(KeyError, match='must contain the key "type"'):
        build_from_cfg(dict(interval=1), HOOKS)


def test_constructor_errors_keep_their_type_and_name_the_class():
    reg = Registry('thing', scope='things_d')

    @reg.register_module()
    class Picky:
        def __init__(self, size):
            if size < 0:
                raise ValueError('size must be >= 0')

    with pytest.raises(TypeError, match='^Picky: .*unexpected keyword'):
        build_from_cfg(dict(type='Picky', size=1, colour='red'), reg)
    with pytest.raises(ValueError, match='^Picky: size must be >= 0'):
        reg.build(dict(type='Picky', size=-1))


def test_functions_and_the_old_register_api():
    reg = Registry('thing', scope='things_e')

    @reg.register_module(name=['double', 'twice'])
    def double(x):
        return 2 * x

    class Old:
        pass

    with pytest.warns(DeprecationWarning, match='old API'):
        reg.register_module(Old)
    assert build_from_cfg(dict(type='twice', x=4), reg) == 8
    assert isinstance(reg.build(dict(type='Old')), Old)
    with pytest.raises(KeyError, match='already registered'):
        reg.register_module(name='double', module=double)


def test_scope_defaults_to_the_creating_module_package():
    assert Registry('x').scope == __name__.split('.')[0]


def test_a_wrapper_registered_in_a_child_registry_is_a_module_wrapper():
    """mmcv 1.7.2's ``is_module_wrapper`` walks MODULE_WRAPPERS' children: a codebase's own
    wrapper registry (``Registry('model wrapper', parent=MODULE_WRAPPERS)``) counts, so a
    checkpoint of the wrapped model has no ``module.`` prefix."""
    import torch
    from torch import nn

    from mtrain.parallel import is_module_wrapper
    from mtrain.registry import MODEL_WRAPPERS
    from mtrain.runner.checkpoint import get_state_dict

    wrappers = Registry('model wrapper', parent=MODEL_WRAPPERS, scope='my_codebase')
    try:
        @wrappers.register_module()
        class MyWrapper(nn.Module):
            def __init__(self, module):
                super().__init__()
                self.module = module

        wrapped = MyWrapper(nn.Linear(2, 2))
        assert is_module_wrapper(wrapped) and not is_module_wrapper(nn.Linear(2, 2))
        assert list(get_state_dict(wrapped)) == ['weight', 'bias']
        assert torch.equal(get_state_dict(wrapped)['weight'], wrapped.module.weight)
    finally:
        MODEL_WRAPPERS._children.pop('my_codebase')


def test_the_optimizer_constructor_refuses_a_non_dict_as_a_type_error():
    from mtrain.optim import DefaultOptimizerConstructor
    with pytest.raises(TypeError, match='the optimizer config must be a dict'):
        DefaultOptimizerConstructor([])


def test_repr_is_mmcvs():
    registry = Registry('cat', scope='zoo')

    @registry.register_module()
    class BritishShorthair:
        pass

    items = {'BritishShorthair': BritishShorthair}
    assert repr(registry) == f'Registry(name=cat, items={items})'


def test_only_classes_and_functions_register_and_the_pre_13_api_still_works():
    registry = Registry('cat', scope='zoo')

    class Demo:
        def some_method(self):
            pass

    with pytest.raises(TypeError, match='module must be a class or a function'):
        registry.register_module(name='some_method', module=Demo().some_method)
    with pytest.raises(TypeError, match='module must be a class or a function'):
        registry.register_module(name='obj')(Demo())
    with pytest.warns(DeprecationWarning):
        @registry.deprecated_register_module(force=True)
        class NewCat:
            pass
    with pytest.warns(DeprecationWarning):
        registry.deprecated_register_module(Demo)
    assert registry.get('NewCat') is NewCat and registry.get('Demo') is Demo
