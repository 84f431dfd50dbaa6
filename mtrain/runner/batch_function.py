"""mmcv 1.x's ``batch_processor`` function, honoured as an mtrain batch processor.

mmcv 1.x (before models had ``train_step``) took a function::

    def batch_processor(model, data, train_mode, **kwargs):
        losses = model(**data)
        loss, log_vars = parse_losses(losses)
        return dict(loss=loss, log_vars=log_vars, num_samples=len(data['img']))

    runner = EpochBasedRunner(model, batch_processor, optimizer, work_dir, logger)

The rule: a plain function, lambda, bound method or ``functools.partial``
given as ``batch_processor`` is mmcv's; any other object is an mtrain batch
processor (``processor(runner, batch, train_mode)``, see
``docs/batch_processors.md``).
"""

import functools
import types
from typing import Any, Callable, Dict

from ..processors.contract import check_step_outputs
from ..processors.to_device import to_device

_FUNCTION_TYPES = (types.FunctionType, types.MethodType, types.BuiltinFunctionType,
                   functools.partial)


def is_mmcv_batch_function(obj: Any) -> bool:
    """Whether ``obj`` is an mmcv-style ``batch_processor(model, data, train_mode)`` function."""
    return isinstance(obj, _FUNCTION_TYPES)


class BatchFunctionProcessor:
    """Calls ``fn(runner.model, batch, train_mode=...)`` with the batch on the runner's device.

    ``fn`` returns ``dict(loss, log_vars, num_samples)`` (``loss`` is what
    the ``OptimizerHook`` backwards), as mmcv's runner required.
    """

    does_backward = False

    def __init__(self, fn: Callable) -> None:
        self.fn = fn

    def __call__(self, runner, batch: Any, train_mode: bool) -> Dict[str, Any]:
        outputs = self.fn(runner.model, to_device(batch, runner.device), train_mode=train_mode)
        return check_step_outputs(outputs, self._name, 'batch_processor', train_mode,
                                  needs_loss=runner.optimizer_hook is not None)

    def _name(self) -> str:
        """The user's function, named in a contract error."""
        return f'batch_processor {getattr(self.fn, "__name__", self.fn)}'
