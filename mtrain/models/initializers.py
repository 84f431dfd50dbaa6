"""mmcv 1.x's ``init_cfg`` initializers and :func:`initialize`, registered in ``INITIALIZERS``.

What ``BaseModule(init_cfg=...)`` means, as in mmcv 1.7.2::

    init_cfg = dict(type='Kaiming', layer='Conv2d')                    # every Conv2d inside
    init_cfg = [dict(type='Kaiming', layer='Conv2d'),
                dict(type='Constant', val=1, layer=['_BatchNorm', 'GroupNorm'])]
    init_cfg = dict(type='Normal', std=0.01, layer='Linear',
                    override=dict(name='fc_cls', type='Normal', std=0.001))  # one child differs
    init_cfg = dict(type='Pretrained', checkpoint='r50.pth', prefix='backbone.')

``layer`` matches a module's class name or the name of one of its direct
base classes. ``override`` initialises the named child as a whole (every
layer in it), after the rule it belongs to; an override with only ``name``
reuses the rule's own arguments. Rules apply in order, so a later rule wins.

Register your own initializer (a class whose instances are called with the
module) with ``@INITIALIZERS.register_module(name='MyInit')``.
"""

import copy
import sys
from typing import Callable, Dict, List, Optional, Union

from torch import nn

from ..registry import INITIALIZERS, lookup
from ..utils import get_logger
from . import weight_init as W


class BaseInit:
    """Arguments every layer initializer takes; ``__call__`` walks the module.

    Args:
        bias: the value to fill biases with.
        bias_prob: when given, the bias is :func:`~.weight_init.bias_init_with_prob` of it.
        layer: class name(s) of the layers to initialise (a module's own class
            or a direct base); ignored for an ``override`` (whole module).
    """

    def __init__(self, *, bias: float = 0, bias_prob: Optional[float] = None,
                 layer: Union[str, List[str], None] = None) -> None:
        self.wholemodule = False
        if not isinstance(bias, (int, float)):
            raise TypeError(f'bias must be a number, but got a {type(bias)}')
        if bias_prob is not None and not isinstance(bias_prob, float):
            raise TypeError(f'bias_prob type must be float, but got {type(bias_prob)}')
        if layer is not None and not isinstance(layer, (str, list)):
            raise TypeError(f'layer must be a str or a list of str, but got a {type(layer)}')
        self.bias = W.bias_init_with_prob(bias_prob) if bias_prob is not None else bias
        layer = [] if layer is None else layer
        self.layer = [layer] if isinstance(layer, str) else layer

    def __call__(self, module: nn.Module) -> None:
        def visit(m: nn.Module) -> None:
            if self.wholemodule or self._matches(m):
                self.init_layer(m)

        module.apply(visit)  # children first, then the module itself: mmcv's draw order
        if hasattr(module, '_params_init_info'):
            W.update_init_info(module, init_info=self._get_init_info())

    def _matches(self, m: nn.Module) -> bool:
        names = {type(m).__name__} | {b.__name__ for b in type(m).__bases__}
        return bool(names & set(self.layer))

    def init_layer(self, m: nn.Module) -> None:
        """Initialise one layer (its ``weight`` and ``bias``)."""
        raise NotImplementedError

    def _get_init_info(self) -> str:
        return f'{type(self).__name__}, bias={self.bias}'


@INITIALIZERS.register_module(name='Constant')
class ConstantInit(BaseInit):
    """Fill weights with ``val``."""

    def __init__(self, val: Union[int, float], **kwargs) -> None:
        super().__init__(**kwargs)
        self.val = val

    def init_layer(self, m: nn.Module) -> None:
        W.constant_init(m, self.val, self.bias)

    def _get_init_info(self) -> str:
        return f'{type(self).__name__}: val={self.val}, bias={self.bias}'


@INITIALIZERS.register_module(name='Xavier')
class XavierInit(BaseInit):
    """Glorot & Bengio (2010); ``distribution`` is ``'normal'`` or ``'uniform'``."""

    def __init__(self, gain: float = 1, distribution: str = 'normal', **kwargs) -> None:
        super().__init__(**kwargs)
        self.gain = gain
        self.distribution = distribution

    def init_layer(self, m: nn.Module) -> None:
        W.xavier_init(m, self.gain, self.bias, self.distribution)

    def _get_init_info(self) -> str:
        return (f'{type(self).__name__}: gain={self.gain}, '
                f'distribution={self.distribution}, bias={self.bias}')


@INITIALIZERS.register_module(name='Normal')
class NormalInit(BaseInit):
    """Weights from N(mean, std²)."""

    def __init__(self, mean: float = 0, std: float = 1, **kwargs) -> None:
        super().__init__(**kwargs)
        self.mean = mean
        self.std = std

    def init_layer(self, m: nn.Module) -> None:
        W.normal_init(m, self.mean, self.std, self.bias)

    def _get_init_info(self) -> str:
        return f'{type(self).__name__}: mean={self.mean}, std={self.std}, bias={self.bias}'


@INITIALIZERS.register_module(name='TruncNormal')
class TruncNormalInit(BaseInit):
    """Weights from N(mean, std²) truncated to [a, b]."""

    def __init__(self, mean: float = 0, std: float = 1, a: float = -2, b: float = 2,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        self.mean, self.std, self.a, self.b = mean, std, a, b

    def init_layer(self, m: nn.Module) -> None:
        W.trunc_normal_init(m, self.mean, self.std, self.a, self.b, self.bias)

    def _get_init_info(self) -> str:
        return (f'{type(self).__name__}: a={self.a}, b={self.b}, mean={self.mean}, '
                f'std={self.std}, bias={self.bias}')


@INITIALIZERS.register_module(name='Uniform')
class UniformInit(BaseInit):
    """Weights from U(a, b)."""

    def __init__(self, a: float = 0., b: float = 1., **kwargs) -> None:
        super().__init__(**kwargs)
        self.a, self.b = a, b

    def init_layer(self, m: nn.Module) -> None:
        W.uniform_init(m, self.a, self.b, self.bias)

    def _get_init_info(self) -> str:
        return f'{type(self).__name__}: a={self.a}, b={self.b}, bias={self.bias}'


@INITIALIZERS.register_module(name='Kaiming')
class KaimingInit(BaseInit):
    """He et al. (2015); mmcv's defaults: ``mode='fan_out'``, ``nonlinearity='relu'``, normal."""

    def __init__(self, a: float = 0, mode: str = 'fan_out', nonlinearity: str = 'relu',
                 distribution: str = 'normal', **kwargs) -> None:
        super().__init__(**kwargs)
        self.a, self.mode, self.nonlinearity = a, mode, nonlinearity
        self.distribution = distribution

    def init_layer(self, m: nn.Module) -> None:
        W.kaiming_init(m, self.a, self.mode, self.nonlinearity, self.bias, self.distribution)

    def _get_init_info(self) -> str:
        # (mmcv's text, including the space before '=')
        return (f'{type(self).__name__}: a={self.a}, mode={self.mode}, '
                f'nonlinearity={self.nonlinearity}, distribution ={self.distribution}, '
                f'bias={self.bias}')


@INITIALIZERS.register_module(name='Caffe2Xavier')
class Caffe2XavierInit(KaimingInit):
    """Caffe2's ``XavierFill``: Kaiming-uniform with ``a=1``, fan-in, leaky ReLU."""

    def __init__(self, **kwargs) -> None:
        super().__init__(a=1, mode='fan_in', nonlinearity='leaky_relu', distribution='uniform',
                         **kwargs)


@INITIALIZERS.register_module(name='Pretrained')
class PretrainedInit:
    """Load a checkpoint (non-strict: what fits is loaded, the rest is reported).

    Args:
        checkpoint: a local checkpoint file (download URLs first).
        prefix: load only the weights under this prefix (``'backbone.'``),
            with the prefix taken off.
        map_location: where to load the tensors (default: the CPU).
    """

    def __init__(self, checkpoint: str, prefix: Optional[str] = None,
                 map_location: Optional[str] = None) -> None:
        self.checkpoint = checkpoint
        self.prefix = prefix
        self.map_location = map_location

    def __call__(self, module: nn.Module) -> None:
        # Checkpoint I/O lives in the runner layer, above the models; imported
        # when a Pretrained init runs, as mmcv does, so models never import the runner.
        from ..runner.checkpoint import load_checkpoint, load_checkpoint_with_prefix, load_state_dict
        logger = get_logger()
        if self.prefix is None:
            logger.info(f'load model from: {self.checkpoint}')
            load_checkpoint(module, self.checkpoint, map_location=self.map_location,
                            strict=False, logger=logger)
        else:
            logger.info(f'load {self.prefix} in model from: {self.checkpoint}')
            state_dict = load_checkpoint_with_prefix(self.prefix, self.checkpoint,
                                                     map_location=self.map_location)
            load_state_dict(module, state_dict, strict=False, logger=logger)
        if hasattr(module, '_params_init_info'):
            W.update_init_info(module, init_info=self._get_init_info())

    def _get_init_info(self) -> str:
        return f'{type(self).__name__}: load from {self.checkpoint}'


def build_initializer(cfg: Dict) -> Callable[[nn.Module], None]:
    """The initializer ``cfg['type']`` names, built with the other keys.

    Looked up in ``INITIALIZERS``, then, when a 1.x codebase has loaded
    mmcv's own ``mmcv.cnn``, in mmcv's registry (where such a codebase
    registers its own initializers). An unknown type is a ``ConfigError``
    naming the closest registered names; a bad argument raises the
    initializer's own ``TypeError`` (as under mmcv).
    """
    args = dict(cfg)
    init_type = args.pop('type')
    init_cls = _find(init_type) if isinstance(init_type, str) else init_type
    return init_cls(**args)


def _find(init_type: str) -> type:
    INITIALIZERS.import_from_location()
    found = INITIALIZERS.get(init_type)
    mmcv_registry = getattr(sys.modules.get('mmcv.cnn.utils.weight_init'), 'INITIALIZERS', None)
    if found is None and mmcv_registry is not None:
        found = mmcv_registry.get(init_type)
    return found if found is not None else lookup(init_type, INITIALIZERS, 'init_cfg')


def _initialize(module: nn.Module, cfg: Dict, wholemodule: bool = False) -> None:
    func = build_initializer(cfg)
    # An override has no `layer`: it initialises the whole named child.
    func.wholemodule = wholemodule
    func(module)


def _initialize_override(module: nn.Module, override: Union[Dict, List], cfg: Dict) -> None:
    if not isinstance(override, (dict, list)):
        raise TypeError(f'override must be a dict or a list of dict, but got {type(override)}')
    for item in [override] if isinstance(override, dict) else override:
        item = copy.deepcopy(item)
        name = item.pop('name', None)
        if name is None:
            raise ValueError(f'`override` must contain the key "name", but got {item}')
        if not item:
            item.update(cfg)  # only a name: the rule's own initializer and arguments
        elif 'type' not in item:
            raise ValueError(f'`override` need "type" key, but got {item}')
        if not hasattr(module, name):
            raise RuntimeError(f'module did not have attribute {name}, but init_cfg is {item}.')
        _initialize(getattr(module, name), item, wholemodule=True)


def initialize(module: nn.Module, init_cfg: Union[Dict, List[Dict]]) -> None:
    """Initialise ``module`` by ``init_cfg`` (a rule or a list of rules, applied in order).

    Each rule is deep-copied first: one ``init_cfg`` shared by many blocks must
    mean the same for each of them.
    """
    if not isinstance(init_cfg, (dict, list)):
        raise TypeError(f'init_cfg must be a dict or a list of dict, but got {type(init_cfg)}')
    for cfg in [init_cfg] if isinstance(init_cfg, dict) else init_cfg:
        cfg = copy.deepcopy(cfg)
        override = cfg.pop('override', None)
        _initialize(module, cfg)
        if override is not None:
            cfg.pop('layer', None)
            _initialize_override(module, override, cfg)
