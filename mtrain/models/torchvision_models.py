"""torchvision's model builders, registered as ``'torchvision.<builder>'``.

This module imports torchvision, so nothing imports it directly: it is the
``locations`` entry of the ``TORCHVISION_MODELS`` registry, which mmengine
imports the first time a config names a ``torchvision.*`` model.

Config::

    # any name in torchvision.models.list_models()
    model = dict(type='ImageClassifier', backbone=dict(type='torchvision.resnet18'),
                 head=dict(type='LinearClsHead', num_classes=10))

Weights: ``weights='IMAGENET1K_V1'`` (or ``'DEFAULT'``) works when the file is
already in torch's hub cache; mtrain never downloads. Otherwise use the
classifier's ``pretrained='path/to/weights.pth'``.
"""

import functools
import inspect
import os.path as osp
import typing
from typing import Any, Callable, Dict
from urllib.parse import urlparse

import torch
import torchvision.models
from torchvision.models import WeightsEnum

from ..registry import TORCHVISION_MODELS
from ..utils import ConfigError


def _weights_enum(annotation: Any):
    """The ``WeightsEnum`` class inside ``Optional[ResNet18_Weights]``-style annotations."""
    for arg in (annotation, *typing.get_args(annotation)):
        if isinstance(arg, type) and issubclass(arg, WeightsEnum):
            return arg
    return None


def check_weights_are_local(name: str, builder: Callable, kwargs: Dict[str, Any]) -> None:
    """Reject a ``weights*`` argument whose file is not in the hub cache (it would download).

    Raises:
        ConfigError: naming the argument, the file it needs and where to put it.
    """
    for param in inspect.signature(builder).parameters.values():
        if not param.name.startswith('weights'):
            continue
        value = kwargs.get(param.name, param.default)
        enum_cls = _weights_enum(param.annotation)
        if value is None or value is param.empty or enum_cls is None:
            continue
        try:
            weights = enum_cls.verify(value)
        except (KeyError, ValueError, TypeError) as e:
            raise ConfigError(f"'{value}' is not a {enum_cls.__name__} value; use one of "
                              f'{", ".join(enum_cls.__members__)} or None', key=param.name) from e
        file_name = osp.basename(urlparse(weights.url).path)
        path = osp.join(torch.hub.get_dir(), 'checkpoints', file_name)
        if not osp.isfile(path):
            raise ConfigError(
                f'torchvision.{name} with {param.name}={value!r} needs {path}, which is not '
                f'there, and mtrain does not download. Copy the file from {weights.url} to '
                f'that path, or set {param.name}=None and give the classifier '
                "pretrained='path/to/weights.pth'", key=param.name)


def _register(name: str) -> None:
    builder = torchvision.models.get_model_builder(name)

    @functools.wraps(builder)
    def build_model(**kwargs) -> torch.nn.Module:
        check_weights_are_local(name, builder, kwargs)
        return builder(**kwargs)

    TORCHVISION_MODELS.register_module(name=name, module=build_model)


for _name in torchvision.models.list_models():
    _register(_name)
