"""Test-only: SIGKILL the training job at a chosen moment (``MTRAIN_KILL_AT``).

Loaded by the kill-anywhere matrix through ``custom_imports=dict(imports=['kill_hook'])``.
``MTRAIN_KILL_AT`` is ``iter:K`` (after iteration K's hooks, before the stage's
checkpoint is written), ``eval:N`` (right after the N-th evaluation's hooks)
or ``save:N`` (inside the N-th checkpoint write: the temporary file is
complete, not yet renamed). Under DDP the rank that reaches the moment kills
every rank of the job (pids in ``<work_dir>/kill_pids``), as a lost node would.
"""

import os
import os.path as osp
import signal

from mtrain.hooks import Hook
from mtrain.registry import HOOKS

_SPEC = os.environ.get('MTRAIN_KILL_AT', '')
_KIND, _, _AT = _SPEC.partition(':')
_real_fsync = os.fsync
_state = {'saves': 0, 'armed': False, 'pids_dir': None}


def _kill_job() -> None:
    folder = _state['pids_dir']
    pids = [int(open(osp.join(folder, n)).read()) for n in os.listdir(folder)] if folder else []
    for pid in pids:
        if pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    os.kill(os.getpid(), signal.SIGKILL)


def _fsync(fd):
    _real_fsync(fd)
    if _state['armed']:  # the checkpoint's temporary file is whole: die before the rename
        _kill_job()


if _KIND == 'save':
    os.fsync = _fsync


@HOOKS.register_module()
class KillAtHook(Hook):
    """Kills the job at ``MTRAIN_KILL_AT`` (nothing when it is unset)."""

    priority = 'LOWEST'

    def before_run(self, runner) -> None:
        folder = osp.join(runner.work_dir, 'kill_pids')
        os.makedirs(folder, exist_ok=True)
        with open(osp.join(folder, f'rank{runner.rank}'), 'w') as f:
            f.write(str(os.getpid()))
        _state['pids_dir'] = folder
        self.evaluations = 0

    def after_train_iter(self, runner) -> None:
        if _KIND == 'iter' and runner.iter + 1 == int(_AT):
            _kill_job()

    def after_evaluation(self, runner) -> None:
        self.evaluations += 1
        if _KIND == 'eval' and self.evaluations == int(_AT):
            _kill_job()

    def before_save_checkpoint(self, runner) -> None:
        _state['saves'] += 1
        if _KIND == 'save' and _state['saves'] == int(_AT):
            _state['armed'] = True
