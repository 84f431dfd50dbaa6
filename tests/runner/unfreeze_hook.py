"""Test-only: a fine-tuning unfreeze schedule for the kill-anywhere matrix (issue 22).

The first layer of the matrix's ``MLPClassifier`` is frozen from the start of
the run until iteration ``at``. The optimizer holds it throughout (it was
built before the freeze), as with a config that unfreezes a backbone later.
"""

from mtrain.hooks import Hook
from mtrain.registry import HOOKS


@HOOKS.register_module()
class UnfreezeAtHook(Hook):
    """``model.head[0]`` trainable from iteration ``at`` (0-based) on."""

    priority = 'HIGHEST'

    def __init__(self, at: int) -> None:
        self.at = at

    def before_run(self, runner) -> None:
        runner.model_wrapper.module.head[0].requires_grad_(runner.iter >= self.at)

    def before_train_iter(self, runner) -> None:
        if runner.iter == self.at:
            runner.model_wrapper.module.head[0].requires_grad_(True)
