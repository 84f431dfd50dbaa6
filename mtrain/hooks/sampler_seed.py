"""Give each epoch its own data order: ``sampler.set_epoch(runner.epoch)``."""

from ..registry import HOOKS
from .hook import Hook


@HOOKS.register_module()
class DistSamplerSeedHook(Hook):
    """Reseed the train sampler before every epoch (every rank, same seed).

    Samplers draw their order from ``seed + epoch``, so the order of epoch N is
    the same in a resumed run as in an uninterrupted one. Under
    ``IterBasedRunner`` the ``IterLoader`` does this itself.
    """

    priority = 'NORMAL'

    def before_epoch(self, runner) -> None:
        loader = runner.data_loader
        if loader is None:
            return
        for sampler in (getattr(loader, 'sampler', None),
                        getattr(getattr(loader, 'batch_sampler', None), 'sampler', None)):
            if hasattr(sampler, 'set_epoch'):
                sampler.set_epoch(runner.epoch)
                return
