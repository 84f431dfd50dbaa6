"""mmcv 1.x logger hooks for services that no longer serve the public: a clear error.

PAVI (internal to OpenMMLab), Segmind and Neptune (hosted service closed
in March 2026).

A 1.x config naming them should say why it cannot run and what to use
instead, not fail with an unknown-type error as if the name were a typo.
"""

from ...registry import HOOKS
from ...utils.errors import ConfigError
from ..hook import Hook
from .tracker import TRACKER_HOOKS

_INSTEAD = (f"Log with one of {', '.join(TRACKER_HOOKS)} instead (docs/logging.md shows each "
            "next to its mmcv 1.x config), or remove this entry from log_config.hooks.")


class _RetiredLoggerHook(Hook):
    """Accepts any mmcv 1.x arguments and refuses to be built, saying why."""

    reason = ''

    def __init__(self, **kwargs) -> None:
        raise ConfigError(f'{type(self).__name__} is not available in mtrain: {self.reason} '
                          f'{_INSTEAD}', key='type')


@HOOKS.register_module()
class PaviLoggerHook(_RetiredLoggerHook):
    """mmcv 1.x's PAVI logger: PAVI was OpenMMLab's internal service, never public."""

    reason = ('it logged to PAVI, an internal OpenMMLab service whose client was never '
              'published, so there is nothing to log to.')


@HOOKS.register_module()
class SegmindLoggerHook(_RetiredLoggerHook):
    """mmcv 1.x's Segmind logger: the Segmind tracking service is no longer offered."""

    reason = ("it logged through Segmind's experiment-tracking library, a service Segmind no "
              'longer offers to the public.')


@HOOKS.register_module()
class NeptuneLoggerHook(_RetiredLoggerHook):
    """mmcv 1.x's Neptune logger: Neptune's hosted service closed in March 2026.

    Why not kept for self-hosted servers: the ``neptune`` client's default and
    only public endpoint was the hosted app, its self-hosted edition was a
    licensed product of the same company, and the client is no longer
    developed (other frameworks are dropping it); an offline run could only
    ever be synced to a Neptune server. See docs/logging.md.
    """

    reason = ("Neptune's hosted service (app.neptune.ai) closed in March 2026 and its client is "
              'no longer developed, so a run logged with it cannot be viewed or synced '
              'anywhere.')
