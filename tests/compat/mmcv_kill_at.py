"""A custom hook for the 2-process kill-and-resume test (imported by the configs' ``custom_imports``).

``KillAtIteration`` SIGKILLs its rank at the end of iteration
``$MTRAIN_TEST_KILL_AFTER`` (1-based) when that variable is set, and does
nothing otherwise, so one config serves the uninterrupted, the killed and the
resumed run. It is an mmcv 1.x hook (``mmcv.runner.Hook``, ``HOOKS``), built
by the codebase's own ``custom_hooks`` code.
"""

import os
import signal

from mmcv.runner import HOOKS, Hook


@HOOKS.register_module()
class KillAtIteration(Hook):

    def after_train_iter(self, runner):
        at = os.environ.get('MTRAIN_TEST_KILL_AFTER')
        if at is not None and runner.iter + 1 == int(at):
            os.kill(os.getpid(), signal.SIGKILL)
