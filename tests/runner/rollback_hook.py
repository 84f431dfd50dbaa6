"""Test-only: a loss-spike rollback as users write one, for the kill-anywhere matrix (issue 22).

At iteration ``snapshot_at`` the hook keeps a copy of the weights and the
optimizer state (a known-good point); at iteration ``rollback_at`` (a spike,
here at a fixed iteration so that every run sees it) it loads both back,
``optimizer.load_state_dict`` included. torch's ``load_state_dict`` builds new
param-group dicts: the LR and momentum schedules must write into those from
then on, as PyTorch's own schedulers do. The snapshot is the hook's state, so
a checkpoint written between the two iterations carries it into a resumed run.
Registered at ``priority='HIGHEST'`` (before the schedules) in the matrix's config.
"""

import copy

from mtrain.hooks import Hook
from mtrain.registry import HOOKS


@HOOKS.register_module()
class RollbackAtHook(Hook):
    """Snapshot before iteration ``snapshot_at``, restore it before ``rollback_at`` (0-based)."""

    def __init__(self, snapshot_at: int, rollback_at: int) -> None:
        self.snapshot_at, self.rollback_at = snapshot_at, rollback_at
        self.snapshot = None

    def before_train_iter(self, runner) -> None:
        if runner.iter == self.snapshot_at:  # the weights and state before this iteration
            self.snapshot = copy.deepcopy({'model': runner.model_wrapper.module.state_dict(),
                                           'optimizer': runner.optimizer.state_dict()})
        elif runner.iter == self.rollback_at:  # a new dict per param group (torch's loader)
            runner.model_wrapper.module.load_state_dict(self.snapshot['model'])
            runner.optimizer.load_state_dict(self.snapshot['optimizer'])

    def state_dict(self):
        return {'snapshot': self.snapshot} if self.snapshot is not None else {}

    def load_state_dict(self, state) -> None:
        self.snapshot = state.get('snapshot')
