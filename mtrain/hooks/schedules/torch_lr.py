"""Any ``torch.optim.lr_scheduler`` class from config, stepped once per optimizer update.

``lr_config = dict(policy='Torch', scheduler=dict(type='OneCycleLR', max_lr=0.1,
total_steps='{num_updates}'))``. Values that depend on the run's length are
written as placeholders and filled in once the train loader exists.
"""

import ast
import inspect
import math
import operator
import string
import warnings
from typing import Any, Dict, Optional

from torch.optim import lr_scheduler

from ...registry import HOOKS
from ...utils.errors import ConfigError, did_you_mean
from ..hook import Hook

#: Placeholder names and what they stand for.
PLACEHOLDERS = {
    'num_updates': 'optimizer updates in the whole run (runner.max_updates)',
    'updates_per_epoch': 'optimizer updates per epoch, rounded up',
    'max_epochs': 'epochs in the run (IterBasedRunner: updates / updates per epoch, rounded up)',
    'max_iters': 'iterations in the run',
}
# Schedulers that need built objects or a metric, which a config cannot give.
_UNSUPPORTED = {
    'ReduceLROnPlateau': 'it steps on a metric, not on updates',
    'SequentialLR': 'it takes built schedulers; write one policy, or a custom hook',
    'ChainedScheduler': 'it takes built schedulers; write one policy, or a custom hook',
}
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.USub: operator.neg}


@HOOKS.register_module()
class TorchLrUpdaterHook(Hook):
    """Drive a ``torch.optim.lr_scheduler`` scheduler by optimizer updates.

    The scheduler is built on the first training iteration (the train loader
    and so the run's length in updates are known then) and stepped once for
    every optimizer update, before the next iteration: the update numbered
    ``u`` (from 0) uses the lr the scheduler gives after ``u`` steps, as in
    the plain PyTorch loop ``optimizer.step(); scheduler.step()``.
    Accumulation micro-steps and skipped fp16 steps do not step it.

    Any string argument may hold placeholders, alone or in arithmetic:
    ``'{num_updates}'``, ``'{updates_per_epoch} * 30'``, ``'{max_epochs}'``,
    ``'{max_iters}'`` (see :data:`PLACEHOLDERS`), like pytorch-accelerated's
    ``TrainerPlaceholderValues``.

    The scheduler's state goes into checkpoints; on resume the lr (and
    momentum) of every param group is exactly what it was when the
    checkpoint was written.

    Config::

        lr_config = dict(policy='Torch', scheduler=dict(
            type='OneCycleLR', max_lr=0.1, total_steps='{num_updates}', pct_start=0.25))
        lr_config = dict(policy='Torch', scheduler=dict(
            type='MultiStepLR', milestones=['{updates_per_epoch} * 8'], gamma=0.1))

    Args:
        scheduler: ``dict(type=<name in torch.optim.lr_scheduler, or a
            scheduler class>, **arguments)`` without the optimizer.
    """

    priority = 'VERY_HIGH'

    def __init__(self, scheduler: Dict[str, Any]) -> None:
        if not isinstance(scheduler, dict) or 'type' not in scheduler:
            raise ConfigError("needs scheduler=dict(type='OneCycleLR', ...), a torch.optim."
                              f'lr_scheduler class and its arguments; got {scheduler!r}',
                              key='lr_config.scheduler')
        args = dict(scheduler)
        self.scheduler_cls = _scheduler_class(args.pop('type'))
        _check_arguments(self.scheduler_cls, args)
        self.args = args
        self.scheduler: Optional[lr_scheduler.LRScheduler] = None
        self._stepped = 0  # scheduler steps taken: optimizer updates it has followed
        self._pending: Dict[str, Any] = {}

    def before_train_iter(self, runner) -> None:
        if self.scheduler is None:
            self._build(runner)
        while self._stepped < runner.num_updates:
            self.scheduler.step()
            self._stepped += 1

    def _build(self, runner) -> None:
        args = fill_placeholders(self.args, placeholder_values(runner))
        optimizer = runner.optimizer
        kept = [{k: v for k, v in g.items() if k != 'params'} for g in optimizer.param_groups]
        try:
            self.scheduler = self.scheduler_cls(optimizer, **args)
        except (TypeError, ValueError) as e:
            raise ConfigError(f'building {self.scheduler_cls.__name__}({args}) failed: {e}',
                              key='lr_config.scheduler') from e
        self._stepped = 0
        if self._pending.get('scheduler'):
            self.scheduler.load_state_dict(self._pending['scheduler'])
            self._stepped = self._pending['stepped']
            # Building reset lr/momentum to the schedule's start; the resumed
            # optimizer state held the values of the checkpoint's moment.
            for group, values in zip(optimizer.param_groups, kept):
                group.update(values)
        elif runner.num_updates:  # resumed without this hook's state: replay the steps
            with warnings.catch_warnings():
                warnings.filterwarnings('ignore', message='Detected call of `lr_scheduler')
                while self._stepped < runner.num_updates:
                    self.scheduler.step()
                    self._stepped += 1
        self._pending = {}

    def state_dict(self) -> Dict[str, Any]:
        if self.scheduler is None:
            return dict(self._pending)
        return {'scheduler': self.scheduler.state_dict(), 'stepped': self._stepped}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        if self.scheduler is None:  # resumed before the run: applied when built
            self._pending = dict(state)
            return
        self.scheduler.load_state_dict(state['scheduler'])
        self._stepped = state['stepped']


def placeholder_values(runner) -> Dict[str, int]:
    """The numbers the placeholders stand for, from a runner whose train loader is set."""
    per_epoch = runner.updates_per_epoch
    max_epochs = runner.max_epochs
    if max_epochs is None:
        max_epochs = math.ceil(runner.max_updates / per_epoch)
    return {'num_updates': runner.max_updates, 'updates_per_epoch': math.ceil(per_epoch),
            'max_epochs': max_epochs, 'max_iters': runner.max_iters}


def fill_placeholders(value: Any, values: Dict[str, int]) -> Any:
    """``value`` with every ``'{name} ...'`` string evaluated (recursively in lists/dicts)."""
    if isinstance(value, dict):
        return {k: fill_placeholders(v, values) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(fill_placeholders(v, values) for v in value)
    if isinstance(value, str) and _field_names(value):
        return _arithmetic(value.format(**values), value)
    return value


def _field_names(text: str) -> list:
    return [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]


def _arithmetic(expression: str, original: str) -> Any:
    """Evaluate ``+ - * / //`` over numbers (nothing else is allowed)."""
    def walk(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.operand))
        raise ValueError(node)

    try:
        result = walk(ast.parse(expression, mode='eval').body)
    except (SyntaxError, ValueError, ZeroDivisionError) as e:
        raise ConfigError(f"'{original}' is not a placeholder expression: write e.g. "
                          "'{updates_per_epoch} * 8' (numbers, + - * / // only)",
                          key='lr_config.scheduler') from e
    return int(result) if isinstance(result, float) and result.is_integer() else result


def _scheduler_class(name: Any) -> type:
    if inspect.isclass(name) and issubclass(name, lr_scheduler.LRScheduler):
        return name
    known = [n for n, c in vars(lr_scheduler).items() if inspect.isclass(c) and
             issubclass(c, lr_scheduler.LRScheduler) and not n.startswith('_')
             and n not in ('LRScheduler', *_UNSUPPORTED)]
    if name in _UNSUPPORTED:
        raise ConfigError(f'{name} cannot be used from lr_config: {_UNSUPPORTED[name]}.',
                          key='lr_config.scheduler.type')
    if not isinstance(name, str) or name not in known:
        raise ConfigError(f'{name!r} is not a torch.optim.lr_scheduler class.'
                          f'{did_you_mean(str(name), known)} Known: {", ".join(sorted(known))}.',
                          key='lr_config.scheduler.type')
    return getattr(lr_scheduler, name)


def _check_arguments(cls: type, args: Dict[str, Any]) -> None:
    """Unknown keywords and unknown placeholders fail when the config is built."""
    params = inspect.signature(cls.__init__).parameters
    accepted = [n for n in params if n not in ('self', 'optimizer')]
    for name, value in args.items():
        if name not in accepted:
            raise ConfigError(f"{cls.__name__} does not accept '{name}'."
                              f'{did_you_mean(name, accepted)} Accepted: {", ".join(accepted)}.',
                              key=f'lr_config.scheduler.{name}')
        for text in _strings(value):
            for field in _field_names(text):
                if field not in PLACEHOLDERS:
                    raise ConfigError(
                        f"unknown placeholder '{{{field}}}'.{did_you_mean(field, PLACEHOLDERS)} "
                        f'Known: {", ".join("{" + p + "}" for p in PLACEHOLDERS)}.',
                        key=f'lr_config.scheduler.{name}')


def _strings(value: Any):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)
