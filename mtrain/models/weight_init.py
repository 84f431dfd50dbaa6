"""Weight-init functions of mmcv 1.x (``mmcv.cnn.utils.weight_init``), same RNG draws.

Each function fills a layer's ``weight`` with one ``torch.nn.init`` call and
its ``bias`` with a constant, in mmcv 1.7.2's order, so with the same seed a
model is initialised bit for bit as under mmcv. The config-driven
initializers (``init_cfg=dict(type='Kaiming', layer='Conv2d')``) built on
these live in :mod:`mtrain.models.initializers`.
"""

import math
import warnings
from typing import Any

import torch
from torch import Tensor, nn


def _has(module: nn.Module, name: str) -> bool:
    return getattr(module, name, None) is not None


def _fill_bias(module: nn.Module, bias: float) -> None:
    if _has(module, 'bias'):
        nn.init.constant_(module.bias, bias)


def constant_init(module: nn.Module, val: float, bias: float = 0) -> None:
    if _has(module, 'weight'):
        nn.init.constant_(module.weight, val)
    _fill_bias(module, bias)


def xavier_init(module: nn.Module, gain: float = 1, bias: float = 0,
                distribution: str = 'normal') -> None:
    assert distribution in ['uniform', 'normal']
    if _has(module, 'weight'):
        fill = nn.init.xavier_uniform_ if distribution == 'uniform' else nn.init.xavier_normal_
        fill(module.weight, gain=gain)
    _fill_bias(module, bias)


def normal_init(module: nn.Module, mean: float = 0, std: float = 1, bias: float = 0) -> None:
    if _has(module, 'weight'):
        nn.init.normal_(module.weight, mean, std)
    _fill_bias(module, bias)


def trunc_normal_init(module: nn.Module, mean: float = 0, std: float = 1, a: float = -2,
                      b: float = 2, bias: float = 0) -> None:
    if _has(module, 'weight'):
        trunc_normal_(module.weight, mean, std, a, b)
    _fill_bias(module, bias)


def uniform_init(module: nn.Module, a: float = 0, b: float = 1, bias: float = 0) -> None:
    if _has(module, 'weight'):
        nn.init.uniform_(module.weight, a, b)
    _fill_bias(module, bias)


def kaiming_init(module: nn.Module, a: float = 0, mode: str = 'fan_out',
                 nonlinearity: str = 'relu', bias: float = 0,
                 distribution: str = 'normal') -> None:
    assert distribution in ['uniform', 'normal']
    if _has(module, 'weight'):
        fill = nn.init.kaiming_uniform_ if distribution == 'uniform' else nn.init.kaiming_normal_
        fill(module.weight, a=a, mode=mode, nonlinearity=nonlinearity)
    _fill_bias(module, bias)


def caffe2_xavier_init(module: nn.Module, bias: float = 0) -> None:
    """Caffe2's ``XavierFill``: PyTorch's ``kaiming_uniform_`` with ``a=1``, fan-in."""
    kaiming_init(module, a=1, mode='fan_in', nonlinearity='leaky_relu', bias=bias,
                 distribution='uniform')


def bias_init_with_prob(prior_prob: float) -> float:
    """The bias whose sigmoid is ``prior_prob`` (focal-loss heads start at a low score)."""
    return float(-math.log((1 - prior_prob) / prior_prob))


def trunc_normal_(tensor: Tensor, mean: float = 0., std: float = 1., a: float = -2.,
                  b: float = 2.) -> Tensor:
    """Fill ``tensor`` from N(mean, std²) truncated to [a, b], in place.

    Draws one uniform value per element and maps it through the inverse
    normal CDF (then clamps), the draws mmcv 1.7.2 makes, so the values are
    mmcv's for the same seed.
    """
    def norm_cdf(x: float) -> float:
        return (1. + math.erf(x / math.sqrt(2.))) / 2.

    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn('mean is more than 2 std from [a, b] in trunc_normal_; the '
                      'distribution of values may be incorrect', stacklevel=2)
    with torch.no_grad():
        low, high = norm_cdf((a - mean) / std), norm_cdf((b - mean) / std)
        tensor.uniform_(2 * low - 1, 2 * high - 1)
        tensor.erfinv_()
        tensor.mul_(std * math.sqrt(2.))
        tensor.add_(mean)
        tensor.clamp_(min=a, max=b)
    return tensor


def update_init_info(module: nn.Module, init_info: str) -> None:
    """Record ``init_info`` for each parameter of ``module`` whose mean has changed.

    ``module._params_init_info`` (set by the top-level ``BaseModule.init_weights``
    on every submodule) maps each parameter to ``{'init_info', 'tmp_mean_value'}``;
    a parameter whose mean differs from the recorded one was just initialised.
    """
    assert hasattr(module, '_params_init_info'), f'Can not find `_params_init_info` in {module}'
    info = module._params_init_info
    for name, param in module.named_parameters():
        assert param in info, (
            f'Find a new :obj:`Parameter` named `{name}` during executing the `init_weights` of '
            f'`{type(module).__name__}`. Please do not add or replace parameters during '
            'executing the `init_weights`. ')
        mean = param.data.mean()
        if _changed(info[param]['tmp_mean_value'], mean):
            info[param]['init_info'] = init_info
            info[param]['tmp_mean_value'] = mean


def _changed(before: Any, after: Tensor) -> bool:
    # mmcv compares with `!=`: NaN means (empty parameters) always count as changed.
    return bool(before != after)
