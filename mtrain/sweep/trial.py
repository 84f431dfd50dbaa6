"""One trial: an ordinary ``tools/train.py`` run of the config with the trial's overrides.

The trial's command is stored in the study (user attribute ``command``) and printed
in the results: run it to reproduce the trial (same seed, same overrides, the pruning
hook in replay mode). The sweep runs that command with ``--auto-resume``, in the
trial's own folder, so a trial that was interrupted continues from its last checkpoint.
"""

import glob
import json
import os
import os.path as osp
import shlex
import signal
import subprocess
import sys
import zlib
from typing import Any, Dict, List, Optional

from ..config import parse_cfg_options, read_config
from ..utils import ConfigError
from . import supervise
from .forkserver import ForkServer
from .space_check import format_override
from .study import SweepSpec

def pruning_hook(spec: SweepSpec, number: int) -> Dict[str, Any]:
    """Trial ``number``'s :class:`OptunaPruningHook` (reports, prunes, replays)."""
    return dict(type='OptunaPruningHook', storage=spec.storage, study_name=spec.study,
                trial_number=number, monitor=spec.metric, pruner=spec.pruner,
                pruner_args=dict(spec.pruner_args))


def trial_options(spec: SweepSpec, number: int, params: Dict[str, Any]) -> List[str]:
    """The trial's ``--cfg-options``: the sweep's, the trial's values, then ``custom_hooks``.

    ``custom_hooks`` comes last and is assembled from the config with every other
    option applied (so ``--cfg-options custom_hooks=[...]`` or a space key such as
    ``custom_hooks.0.momentum`` is in it), plus the pruning hook; the result is
    read back to check that the hook is there.

    Raises:
        ConfigError: the hooks cannot be written on a command line.
    """
    options = [*spec.cfg_options, *(format_override(k, v) for k, v in params.items())]
    hooks = _written_hooks(spec.config, options) + [pruning_hook(spec, number)]
    text = f'custom_hooks={literal(hooks)}'
    try:
        ok = parse_cfg_options([text])['custom_hooks'] == hooks
    except ConfigError:
        ok = False
    if not ok:
        raise ConfigError('the config\'s custom_hooks cannot be written on a command line '
                          '(they hold values other than numbers, strings, lists and dicts), '
                          'so the trials cannot add the pruning hook to them',
                          key='custom_hooks', filename=spec.config)
    options.append(text)
    assert _written_hooks(spec.config, options)[-1] == hooks[-1], \
        "[sweep] the trial's options lost its pruning hook"
    return options


def _written_hooks(config: str, options: List[str]) -> List[Dict[str, Any]]:
    """``custom_hooks`` of ``config`` with ``options`` applied, in the config's own schema
    (an mmengine config's, before the converter adds its hooks)."""
    cfg = read_config(config, parse_cfg_options(options))
    return list(cfg.to_dict().get('custom_hooks') or [])


def check_hooks_option(spec: SweepSpec) -> None:
    """The config's ``custom_hooks`` must survive the command line (plain literals)."""
    trial_options(spec, 0, {})


def trial_command(spec: SweepSpec, number: int, work_dir: str,
                  params: Dict[str, Any]) -> List[str]:
    """The command that runs (and re-runs) trial ``number``."""
    options = trial_options(spec, number, params)
    train = [spec.train_script, osp.abspath(spec.config), '--work-dir', work_dir, '--seed',
             str(spec.seed)]
    if spec.launcher == 'none':
        return [sys.executable, *train, '--cfg-options', *options]
    train += ['--launcher', spec.launcher, '--cfg-options', *options]
    if spec.launcher == 'slurm':
        return [*srun_command(spec, number), sys.executable, '-u', *train]
    return [sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc-per-node',
            str(spec.gpus_per_trial), *train]


def srun_command(spec: SweepSpec, number: int) -> List[str]:
    """``srun`` as ``tools/slurm_train.sh`` runs it: a job step of one task per GPU.

    Each task reads its rank from ``SLURM_PROCID`` (``--launcher slurm``); the job step
    ends as a whole when one task fails (``--kill-on-bad-exit=1``).
    """
    gpus = spec.gpus_per_node if spec.gpus_per_node is not None else min(
        spec.gpus_per_trial, 8)
    return ['srun', *(['-p', spec.partition] if spec.partition else []),
            f'--job-name={spec.study}_trial_{number}',
            *([f'--gres=gpu:{gpus}'] if gpus else []),  # 0: a CPU partition
            f'--ntasks={spec.gpus_per_trial}',
            f'--ntasks-per-node={gpus or min(spec.gpus_per_trial, 8)}',
            f'--cpus-per-task={spec.cpus_per_task}', '--kill-on-bad-exit=1',
            *shlex.split(spec.srun_args)]


def master_port(spec: SweepSpec, number: int) -> int:
    """A Slurm trial's ``MASTER_PORT``: trials of a sweep that share a node must differ."""
    return 20000 + (zlib.crc32(spec.study.encode()) + number) % 20000


def literal(value: Any) -> str:
    """``value`` as config text: ``dict(k=...)`` and double-quoted strings (shell-friendly)."""
    if isinstance(value, dict):
        if all(isinstance(k, str) and k.isidentifier() for k in value):
            return 'dict(' + ', '.join(f'{k}={literal(v)}' for k, v in value.items()) + ')'
        return '{' + ', '.join(f'{literal(k)}: {literal(v)}' for k, v in value.items()) + '}'
    if isinstance(value, list):
        return '[' + ', '.join(literal(v) for v in value) + ']'
    if isinstance(value, tuple):
        return '(' + ''.join(f'{literal(v)}, ' for v in value) + ')'
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def start_trial(command: List[str], work_dir: str, env: Dict[str, str], lock_fd: int,
                forks: Optional[ForkServer] = None) -> Any:
    """Start ``command --auto-resume``, output appended to ``work_dir/train.out``.

    With ``forks`` the run is a fork of the sweep's fork server
    (:mod:`mtrain.sweep.forkserver`); else a fresh process in its own session (a Ctrl-C at
    the terminal reaches the sweep, which passes one SIGTERM on) that inherits the trial's
    lock (``lock_fd``) and runs under :mod:`mtrain.sweep.supervise`, which stops it cleanly
    if the sweep dies. Either way the result has ``poll``, ``wait`` and ``send_signal``.
    """
    os.makedirs(work_dir, exist_ok=True)
    command = [*command, '--auto-resume']
    with open(osp.join(work_dir, 'train.out'), 'ab') as out:
        out.write(f'$ {shlex.join(command)}\n'.encode())
        out.flush()
        if forks is not None:
            return forks.launch(command, work_dir, env, lock_fd)
        argv = [sys.executable, supervise.__file__, str(os.getpid()), *command]
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                env=dict(env, MTRAIN_SWEEP_FDS=str(lock_fd)),
                                pass_fds=(lock_fd, ), start_new_session=True)


def stop_trial(proc: Any, at_once: bool = False) -> None:
    """Ask a run to stop as on preemption (it saves a checkpoint and exits), or ``at_once``."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGUSR1 if at_once else signal.SIGTERM)


def final_metric(work_dir: str, metric: str) -> Optional[float]:
    """The last evaluation's ``metric`` in the trial's ``*.log.json`` files (oldest first)."""
    value = None
    for path in sorted(glob.glob(osp.join(work_dir, '*.log.json'))):
        with open(path) as f:
            for line in f:
                record = json.loads(line) if line.strip() else {}
                if record.get('mode') == 'val' and isinstance(record.get(metric), (int, float)):
                    value = float(record[metric])
    return value


def error_line(work_dir: str) -> str:
    """The message of the ``error: ...`` line (or the last line) of the trial's output."""
    path = osp.join(work_dir, 'train.out')
    if not osp.isfile(path):
        return 'no output'
    with open(path, errors='replace') as f:
        lines = [line.rstrip() for line in f if line.strip()]
    errors = [line.split('error: ', 1)[1] for line in lines if 'error: ' in line]
    return (errors or lines or ['no output'])[-1]
