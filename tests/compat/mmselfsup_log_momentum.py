"""A custom hook for the mmselfsup comparison (imported by the BYOL config's ``custom_imports``).

``LogTargetMomentum`` puts the target network's momentum coefficient, which
mmselfsup's ``BYOLHook`` (``MomentumUpdateHook``) sets before each iteration
(a cosine ramp towards ``end_momentum``), into the log line of that
iteration, so the comparison checks it per iteration. An mmcv 1.x hook
(``mmcv.runner.Hook``, ``HOOKS``), built by mmselfsup's own ``custom_hooks`` code.
"""

from mmcv.runner import HOOKS, Hook


@HOOKS.register_module()
class LogTargetMomentum(Hook):

    def after_train_iter(self, runner):
        runner.log_buffer.update({'target_momentum': runner.model.module.momentum})
