"""mmengine's ``default_hooks``: which slots a config keeps, replaces or switches off.

mmengine 0.10's ``Runner.register_default_hooks`` starts from six slots
(``MMENGINE_DEFAULT_HOOKS``), lets a config replace a slot's hook (any type)
and pops a slot the config sets to ``None``. mtrain runs the six jobs with
its own machinery (its loop reseeds the sampler, times iterations and keeps
the runtime information), so each slot is read here once:

- ``param_scheduler=None``: mmengine still builds the schedulers (building
  applies their step-0 values) but nothing steps them, so the lr stays at
  its step-0 value for the whole run. mtrain does the same (a
  ``ParamSchedulerHook`` that builds and never steps).
- ``sampler_seed=None``: mmengine's sampler then keeps epoch 0's order in
  every epoch; mtrain's loop reseeds it each epoch: lossy, reported.
- ``timer=None``/``runtime_info=None``: nothing the run computes changes.
- a slot whose ``type`` is not mmengine's own hook (a user's subclass, written
  against mmengine's hook API): mtrain cannot run it in that slot, so it is a
  :class:`ConfigError` naming the key, before anything is built. Before this,
  the type was dropped without a word.
"""

from typing import Any, Dict

from ..defaults import MMENGINE_DEFAULT_HOOKS
from ..utils.errors import ConfigError
from .report import ConversionReport

#: Slots mtrain fills with its own machinery (``checkpoint`` and ``logger`` are translated).
_OWN_SLOTS = ('runtime_info', 'timer', 'sampler_seed', 'param_scheduler', 'checkpoint',
              'logger')


def read_default_hooks(src: Dict[str, Any], report: ConversionReport) -> Dict[str, Any]:
    """Pop ``default_hooks`` from ``src``: every slot after the config's changes.

    A slot the config switched off maps to ``None`` (unlike mmengine, which
    pops it), so callers can tell "off" from "mmengine's default".
    """
    given = dict(src.pop('default_hooks', None) or {})
    for name in _OWN_SLOTS:
        hook = given.get(name)
        default = MMENGINE_DEFAULT_HOOKS[name]['type']
        if isinstance(hook, dict) and hook.get('type', default) != default:
            raise ConfigError(
                f"{hook['type']!r} in place of mmengine's {default}: mtrain runs this slot "
                f"with its own {default} and cannot run a replacement written for mmengine's "
                'hook API. Remove it (and set the arguments mtrain knows on the default), or '
                'write it as an mtrain hook and list it in custom_hooks',
                key=f'default_hooks.{name}.type')
    if 'sampler_seed' in given and given['sampler_seed'] is None:
        report.lossy('default_hooks.sampler_seed', '(dropped)', "mmengine's sampler would "
                     "keep epoch 0's order in every epoch; mtrain's loop reseeds it each epoch")
    for name in ('timer', 'runtime_info'):
        if name in given and given[name] is None:
            report.note(f'default_hooks.{name}', '(dropped)', 'no effect on what the run '
                        'computes')
    return {**MMENGINE_DEFAULT_HOOKS, **given}


def schedules_step(hooks: Dict[str, Any]) -> bool:
    """False when the config switched mmengine's ``ParamSchedulerHook`` off."""
    return hooks.get('param_scheduler') is not None
