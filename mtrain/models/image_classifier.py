"""``ImageClassifier``: a backbone, a head and cross-entropy, built from config."""

import logging
import pickle
from typing import Any, Dict, Optional, Union

import torch
import torch.nn.functional as F
from torch import nn

from ..registry import MODELS, build
from ..utils import ConfigError
from ..utils.modules import strip_wrapper_prefix

logger = logging.getLogger('mtrain')


@MODELS.register_module()
class ImageClassifier(nn.Module):
    """Backbone → head → logits; the loss dict in train mode, softmax scores in eval.

    A torchvision backbone (``type='torchvision.<builder>'``) has its last
    ``nn.Linear`` (the ImageNet classifier) replaced by ``nn.Identity`` and the
    head's ``in_channels`` set to that layer's input width. Any other
    registered module is used as it is: it must return ``(N, C)`` features or
    ``(N, C, H, W)`` maps, and ``head.in_channels`` must say ``C``.

    Config::

        model = dict(
            type='ImageClassifier',
            backbone=dict(type='torchvision.resnet18'),
            head=dict(type='LinearClsHead', num_classes=10),
            label_smoothing=0.1,
            pretrained='checkpoints/resnet18-f37072fd.pth')  # local file, optional

    Args:
        backbone: config of the backbone (a ``MODELS`` entry).
        head: config of the head (default type ``LinearClsHead``).
        label_smoothing: cross-entropy label smoothing in [0, 1).
        pretrained: a local weights file: a state dict of the backbone (e.g.
            torchvision's ImageNet file) or of the whole classifier (keys
            starting with ``backbone.``, or an mtrain checkpoint). Loaded with
            ``torch.load(weights_only=True)``; keys that do not fit are
            reported, not fatal (see :attr:`pretrained_report`).
    """

    def __init__(self, backbone: Dict[str, Any], head: Dict[str, Any],
                 label_smoothing: float = 0.0, pretrained: Optional[str] = None) -> None:
        super().__init__()
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f'label_smoothing must be in [0, 1), got {label_smoothing}')
        self.backbone = build(backbone, MODELS, key='backbone')
        in_channels = None
        if type(self.backbone).__module__.startswith('torchvision.'):
            in_channels = replace_classifier(self.backbone)
        head = dict(head)
        head.setdefault('type', 'LinearClsHead')
        self.head = build(head, MODELS, key='head',
                          default_args={} if in_channels is None else dict(in_channels=in_channels))
        self.label_smoothing = label_smoothing
        self.pretrained_report: Dict[str, list] = {}
        if pretrained is not None:
            self.pretrained_report = self.load_pretrained(pretrained)

    def forward(self, img: torch.Tensor, gt_label: Optional[torch.Tensor] = None,
                **kwargs) -> Union[Dict[str, torch.Tensor], torch.Tensor]:
        features = self.backbone(img)
        if isinstance(features, tuple):  # inception/googlenet: (main, aux...) in train mode
            features = features[0]
        logits = self.head(features)
        if self.training:
            if gt_label is None:
                raise ValueError('ImageClassifier needs gt_label in train mode: the dataset '
                                 "items must hold 'gt_label' next to 'img'")
            return {'loss': F.cross_entropy(logits.float(), gt_label,
                                            label_smoothing=self.label_smoothing)}
        return logits.float().softmax(dim=1)

    def load_pretrained(self, path: str) -> Dict[str, list]:
        """Load ``path`` into the backbone (or the whole model) and report what did not fit.

        Returns:
            ``{'missing': [...], 'unexpected': [...], 'mismatched': [...]}`` key lists.
        """
        state = _read_weights(path)
        whole_model = any(k.startswith(('backbone.', 'head.')) for k in state)
        target = self if whole_model else self.backbone
        own = target.state_dict()
        mismatched = [k for k, v in state.items()
                      if k in own and tuple(own[k].shape) != tuple(v.shape)]
        state = {k: v for k, v in state.items() if k not in mismatched}
        result = target.load_state_dict(state, strict=False)
        report = {'missing': list(result.missing_keys), 'unexpected': list(result.unexpected_keys),
                  'mismatched': mismatched}
        where = 'the classifier' if whole_model else 'the backbone'
        logger.info(f'pretrained weights from {path} loaded into {where}: '
                    f'{len(state) - len(report["unexpected"])} tensors; '
                    + '; '.join(f'{kind} keys: {_short(keys)}' for kind, keys in report.items()))
        return report


def replace_classifier(backbone: nn.Module) -> int:
    """Replace the last ``nn.Linear`` of ``backbone`` by ``nn.Identity``; return its input width."""
    linears = [(name, m) for name, m in backbone.named_modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise ConfigError(f'{type(backbone).__name__} has no nn.Linear classifier layer to '
                          'replace; use a backbone that ends in one, or register a module '
                          'that returns features and set head.in_channels', key='backbone')
    name, layer = linears[-1]
    parent_name, _, attr = name.rpartition('.')
    parent = backbone.get_submodule(parent_name) if parent_name else backbone
    setattr(parent, attr, nn.Identity())
    return layer.in_features


def _read_weights(path: str) -> Dict[str, torch.Tensor]:
    try:
        state = torch.load(path, map_location='cpu', weights_only=True)
    except FileNotFoundError as e:
        raise ConfigError(f'the weights file {path} does not exist; give the path of a local '
                          '.pth file (mtrain does not download)', key='pretrained') from e
    except pickle.UnpicklingError as e:
        raise ConfigError(f'{path} holds more than tensors (weights_only loading refused it: '
                          f'{str(e).splitlines()[0]}); re-save only the state dict with '
                          'torch.save(model.state_dict(), path)', key='pretrained') from e
    if isinstance(state, dict) and isinstance(state.get('state_dict'), dict):
        state = state['state_dict']  # an mtrain (or mmcv) checkpoint
    if isinstance(state, dict) and state and all(k.startswith('module.') for k in state):
        state = strip_wrapper_prefix(state)  # saved from a wrapper
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ConfigError(f'{path} is not a state dict (name → tensor); save one with '
                          'torch.save(model.state_dict(), path)', key='pretrained')
    return state


def _short(keys: list, limit: int = 5) -> str:
    if not keys:
        return 'none'
    more = f' (+{len(keys) - limit} more)' if len(keys) > limit else ''
    return ', '.join(keys[:limit]) + more
