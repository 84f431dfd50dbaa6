"""mmcv 1.x's ``BaseModule`` (``mmcv.runner.base_module``): modules initialised by ``init_cfg``.

Backbones, necks and heads of 1.x-era codebases subclass these and their
training scripts call ``model.init_weights()`` once after building::

    class Head(BaseModule):
        def __init__(self, init_cfg=dict(type='Normal', std=0.01, layer='Linear')):
            super().__init__(init_cfg)
            self.fc = nn.Linear(256, 10)

    model.init_weights()   # applies every init_cfg, parents first, then children

What ``init_weights`` does, as mmcv 1.7.2:

1. The top-level call records, for every parameter, its mean and the text
   "The value is the same before and after calling `init_weights` of <Top>",
   shared by every submodule (``_params_init_info``).
2. If the module has not been initialised: its own ``init_cfg`` is applied
   (:func:`~mtrain.models.initializers.initialize`); a ``Pretrained`` rule (a
   dict) ends the call there, so children keep the loaded weights. Then each
   child with an ``init_weights`` (a ``BaseModule`` or a user's own method) is
   initialised in registration order, and the parameters it changed are
   logged as "Initialized by user-defined `init_weights` in <Child>".
   A second call only warns.
3. The top-level call writes "<name> - <shape>: <how it was initialised>"
   for every parameter to the log file of the run's logger (or logs it when
   it has no file), on rank 0, then removes ``_params_init_info``. The
   logger is mmcv's choice, the first one ``get_logger`` set up (a 1.x
   codebase's root logger, e.g. ``mmcls``), else the ``mtrain`` logger.
"""

import copy
import logging
import sys
import warnings
from abc import ABCMeta
from collections import defaultdict
from logging import FileHandler
from typing import Iterable, Optional

from torch import nn

from ..utils import get_logger, master_only
from .initializers import initialize
from .weight_init import update_init_info


class BaseModule(nn.Module, metaclass=ABCMeta):
    """``nn.Module`` with ``init_cfg`` and ``init_weights()`` (see the module docstring).

    Args:
        init_cfg: an initializer rule or a list of them (deep-copied), e.g.
            ``dict(type='Kaiming', layer='Conv2d')``; None: no own rule.

    Attributes:
        is_init: whether ``init_weights`` has run on this module.

    Its metaclass is ``ABCMeta``, as mmcv's: a subclass's ``@abstractmethod``
    must be implemented before it can be built.
    """

    def __init__(self, init_cfg: Optional[dict] = None) -> None:
        super().__init__()
        self._is_init = False
        self.init_cfg = copy.deepcopy(init_cfg)

    @property
    def is_init(self) -> bool:
        return self._is_init

    def init_weights(self) -> None:
        """Apply ``init_cfg`` here, then the children's ``init_weights`` (once)."""
        top_level = not hasattr(self, '_params_init_info')
        if top_level:
            self._start_init_info()
        if self._is_init:
            warnings.warn(f'init_weights of {type(self).__name__} has been called more than once.')
        elif not self._init_self_and_children():
            return  # Pretrained: children keep the loaded weights (and the info stays, as mmcv)
        if top_level:
            self._dump_init_info()
            for sub in self.modules():
                del sub._params_init_info

    def _start_init_info(self) -> None:
        info = defaultdict(dict)
        for param in self.parameters():
            info[param]['init_info'] = (f'The value is the same before and after calling '
                                        f'`init_weights` of {type(self).__name__} ')
            info[param]['tmp_mean_value'] = param.data.mean()
        for sub in self.modules():  # one dict for all: any level's changes land in it
            sub._params_init_info = info

    def _init_self_and_children(self) -> bool:
        """Returns False when a ``Pretrained`` rule ends the initialisation here."""
        if self.init_cfg:
            _init_logger().info(f'initialize {type(self).__name__} with init_cfg {self.init_cfg}')
            initialize(self, self.init_cfg)
            if isinstance(self.init_cfg, dict) and self.init_cfg['type'] == 'Pretrained':
                return False
        for child in self.children():
            if hasattr(child, 'init_weights'):
                child.init_weights()
                update_init_info(child, init_info='Initialized by user-defined `init_weights` '
                                                  f'in {type(child).__name__} ')
        self._is_init = True
        return True

    @master_only
    def _dump_init_info(self) -> None:
        """How each parameter was initialised, into the log file (or the log)."""
        logger = _init_logger()
        lines = [f'\n{name} - {param.shape}: \n{self._params_init_info[param]["init_info"]} \n'
                 for name, param in self.named_parameters()]
        files = [h for h in logger.handlers if isinstance(h, FileHandler)]
        for handler in files:
            handler.stream.write('Name of parameter - Initialization information\n')
            handler.stream.write(''.join(lines))
            handler.stream.flush()
        if not files:
            for line in lines:
                logger.info(line + ' ')

    def __repr__(self) -> str:
        text = super().__repr__()
        return f'{text}\ninit_cfg={self.init_cfg}' if self.init_cfg else text


def _init_logger() -> logging.Logger:
    """The first logger set up by ``get_logger`` (mmcv's or mtrain's registry of them), else mtrain's.

    Looked up in modules already loaded only: mmcv is never imported for it.
    """
    for module in ('mtrain.utils.logging', 'mmcv.utils.logging'):
        initialized = getattr(sys.modules.get(module), 'logger_initialized', None)
        if initialized:
            return logging.getLogger(next(iter(initialized)))
    return get_logger()


class Sequential(BaseModule, nn.Sequential):
    """``nn.Sequential`` with ``init_cfg``."""

    def __init__(self, *args: nn.Module, init_cfg: Optional[dict] = None) -> None:
        BaseModule.__init__(self, init_cfg)
        nn.Sequential.__init__(self, *args)


class ModuleList(BaseModule, nn.ModuleList):
    """``nn.ModuleList`` with ``init_cfg``."""

    def __init__(self, modules: Optional[Iterable] = None,
                 init_cfg: Optional[dict] = None) -> None:
        BaseModule.__init__(self, init_cfg)
        nn.ModuleList.__init__(self, modules)


class ModuleDict(BaseModule, nn.ModuleDict):
    """``nn.ModuleDict`` with ``init_cfg``."""

    def __init__(self, modules: Optional[dict] = None,
                 init_cfg: Optional[dict] = None) -> None:
        BaseModule.__init__(self, init_cfg)
        nn.ModuleDict.__init__(self, modules)
