"""mmcv 1.x's ``register_*_hook`` family, a mixin of :class:`~mtrain.runner.BaseRunner`.

Each method takes a config dict (or a built hook, or None for "none"),
builds it through :mod:`.training_hooks` (the one place hook configs become
hooks) and registers it at mmcv's priority::

    runner.register_lr_hook(dict(policy='step', step=[8, 11]))   # VERY_HIGH
    runner.register_momentum_hook(None)                          # nothing
    runner.register_optimizer_hook(dict(grad_clip=None))         # ABOVE_NORMAL
    runner.register_checkpoint_hook(dict(interval=1))            # NORMAL
    runner.register_timer_hook(dict(type='IterTimerHook'))       # LOW
    runner.register_logger_hooks(dict(interval=50, hooks=[dict(type='TextLoggerHook')]))
    runner.register_custom_hooks([dict(type='EMAHook', priority='ABOVE_NORMAL')])
    runner.register_hook_from_cfg(dict(type='MyHook', priority='LOW'))
"""

from typing import Any, Dict, Iterable, Tuple

from ..hooks.hook import STAGES
from ..utils import Priority
from .training_hooks import build_custom_hooks, build_training_hooks, with_runner_defaults


class HookRegistration:
    """The registration methods; the class using it provides ``register_hook`` and ``_hooks``."""

    def _register_all(self, pairs: Iterable[Tuple[Any, Any]]) -> None:
        for hook, priority in pairs:
            self.register_hook(hook, priority)

    def register_training_hooks(self, lr_config=None, optimizer_config=None,
                                checkpoint_config=None, log_config=None,
                                momentum_config=None, timer_config=dict(type='IterTimerHook'),
                                custom_hooks_config=None) -> None:
        """Register the standard hooks from their config dicts (mmcv 1.x order).

        The checkpoint, lr, momentum and logger configs take this runner
        type's ``by_epoch`` where they leave it out (:mod:`mtrain.defaults`:
        ``False`` under ``IterBasedRunner``, as mmcv's).
        """
        configs = with_runner_defaults(type(self), lr_config=lr_config,
                                       checkpoint_config=checkpoint_config,
                                       log_config=log_config, momentum_config=momentum_config)
        self._register_all(build_training_hooks(
            optimizer_config=optimizer_config, timer_config=timer_config,
            custom_hooks_config=custom_hooks_config, **configs))

    def register_lr_hook(self, lr_config) -> None:
        self._register_all(build_training_hooks(lr_config=lr_config, timer_config=None))

    def register_momentum_hook(self, momentum_config) -> None:
        self._register_all(build_training_hooks(momentum_config=momentum_config,
                                                timer_config=None))

    def register_optimizer_hook(self, optimizer_config) -> None:
        self._register_all(build_training_hooks(optimizer_config=optimizer_config,
                                                timer_config=None))

    def register_checkpoint_hook(self, checkpoint_config) -> None:
        self._register_all(build_training_hooks(checkpoint_config=checkpoint_config,
                                                timer_config=None))

    def register_timer_hook(self, timer_config) -> None:
        self._register_all(build_training_hooks(timer_config=timer_config))

    def register_logger_hooks(self, log_config) -> None:
        self._register_all(build_training_hooks(log_config=log_config, timer_config=None))

    def register_custom_hooks(self, custom_config) -> None:
        """A list of hook configs or hooks, or a single one (a priority key is honoured)."""
        self._register_all(build_custom_hooks(custom_config))

    def register_profiler_hook(self, profiler_config) -> None:
        self._register_all(build_training_hooks(profiler_config=profiler_config,
                                                timer_config=None))

    def register_hook_from_cfg(self, hook_cfg: Dict[str, Any]) -> None:
        """Build ``hook_cfg`` (``type`` and an optional ``priority``) and register it."""
        self._register_all(build_custom_hooks([hook_cfg]))

    def get_hook_info(self) -> str:
        """A table of which hooks run at which stage, for the log."""
        lines = []
        for stage in STAGES:
            names = [f'({_priority_name(h.priority):<12}) {type(h).__name__:<35}'
                     for h in self._hooks if stage in h.triggered_stages()]
            if names:
                lines.append(f'{stage}:\n' + '\n'.join(names) + '\n -------------------- ')
        return '\n'.join(lines)


def _priority_name(value: int) -> str:
    names = {p.value: p.name for p in Priority}
    return names.get(value, str(value))
