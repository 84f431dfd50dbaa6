"""Run a sweep's trials, ``jobs`` at a time, until the study has ``trials`` of them.

Each of ``jobs`` worker threads claims a trial (:mod:`mtrain.sweep.claims`), runs it as
a training process (:mod:`mtrain.sweep.trial`) and tells Optuna how it ended:

======================================  =====================================
the training process                    the trial
======================================  =====================================
exits 0, the pruning hook stopped it    PRUNED (value: its last report)
exits 0                                 COMPLETE with the last evaluation's metric
exits 2 (a config error: the metric     FAIL, and the sweep stops: every trial
is not among the results, ...)          would fail the same way
stopped because the sweep was stopped   left RUNNING: the next run resumes it
exits otherwise                         FAIL (``error`` user attribute); the sweep goes on
======================================  =====================================
"""

import os
import shlex
import signal
import threading
import time
from typing import Any, Callable, Dict, List, Optional

import torch

from ..hooks.optuna_pruning import import_optuna
from .claims import Claim, claim_trial
from .forkserver import ForkServer
from .study import SweepSpec, build_sampler
from .trial import (error_line, final_metric, master_port, start_trial, stop_trial,
                    trial_command)


class Sweeper:
    """Claims, runs and reports trials; SIGINT/SIGTERM stop it with every trial resumable.

    Args:
        spec: the sweep.
        study: its Optuna study (:func:`mtrain.sweep.study.open_study`).
        log: where progress lines go.
        forks: the fork server that starts trials (:mod:`mtrain.sweep.forkserver`); None:
            each trial a fresh process.
    """

    def __init__(self, spec: SweepSpec, study: Any, log: Callable[[str], None] = print,
                 forks: Optional[ForkServer] = None) -> None:
        self.spec = spec
        self.forks = forks
        self.study = study
        self.log = log
        self.stopped_by: Optional[str] = None  # the signal that stopped the sweep
        self.abort: Optional[str] = None  # the error that stopped it
        self._procs: Dict[int, Any] = {}
        self._procs_lock = threading.Lock()

    def run(self) -> None:
        """Work until the study is full, a signal arrives or a trial shows a config error."""
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            workers = [threading.Thread(target=self._worker, args=(slot, ), daemon=True)
                       for slot in range(self.spec.jobs)]
            for worker in workers:
                worker.start()
            for worker in workers:
                while worker.is_alive():
                    worker.join(timeout=0.2)  # the main thread stays free for signals
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _on_signal(self, signum: int, frame: Any) -> None:
        first = self.stopped_by is None
        self.stopped_by = signal.Signals(signum).name
        if first:
            self.log(f'{self.stopped_by}: stopping the running trials at their next iteration '
                     '(each saves a checkpoint); run the same command again to continue')
        with self._procs_lock:
            for proc in self._procs.values():
                stop_trial(proc, at_once=not first)

    def _worker(self, slot: int) -> None:
        while self.stopped_by is None and self.abort is None:
            claim = claim_trial(self.study, self.spec.work_dir, self.spec.space, self.spec.trials,
                                lambda trials: build_sampler(self.spec, trials))
            if claim is None:
                return
            try:
                self._run(claim, slot)
            except Exception as e:  # noqa: BLE001  (the other workers must learn of it)
                self.abort = f'{type(e).__name__}: {e}'
            finally:
                claim.lock.release()

    def _run(self, claim: Claim, slot: int) -> None:
        trial = import_optuna().trial.Trial(self.study, claim.trial_id)
        command = trial_command(self.spec, claim.number, claim.work_dir, claim.params)
        env = self._env(slot, claim.number)
        # With its thread count (CPU kernels may sum in another order on another count)
        # and, under Slurm, its master port.
        recorded = ['OMP_NUM_THREADS'] + (['MASTER_PORT'] if self.spec.launcher == 'slurm' else [])
        settings = ''.join(f'{k}={env[k]} ' for k in recorded)
        for name, value in (('command', settings + shlex.join(command)), ('seed', self.spec.seed),
                            ('work_dir', claim.work_dir)):
            trial.set_user_attr(name, value)  # again on adoption: an orphan may lack them
        overrides = ' '.join(f'{k}={v!r}' for k, v in claim.params.items())
        self.log(f"trial {claim.number}: {'resuming' if claim.adopted else 'starting'} "
                 f'{overrides} in {claim.work_dir}')
        start = time.time()
        proc = start_trial(command, claim.work_dir, env, claim.lock.fd, self.forks)
        with self._procs_lock:
            self._procs[slot] = proc
        if self.stopped_by is not None:
            stop_trial(proc)
        code = proc.wait()
        with self._procs_lock:
            self._procs.pop(slot, None)
        if getattr(proc, 'lost', False):
            self.abort = (f'the fork server that ran trial {claim.number} died; run the same '
                          'command again to resume it (or add --no-fork)')
            return
        self._finish(claim, trial, code, time.time() - start)

    def _finish(self, claim: Claim, trial: Any, code: int, seconds: float) -> None:
        """Tell Optuna how the trial ended (see the module's table)."""
        states = import_optuna().trial.TrialState
        number, took = claim.number, f'{seconds:.1f} s'
        if code != 0 and self.stopped_by is not None:
            self.log(f'trial {number}: interrupted after {took}; it resumes on the next run')
            return
        if code == 0:
            frozen = self.study._storage.get_trial(claim.trial_id)  # noqa: SLF001
            if 'pruned_at_step' in frozen.user_attrs:
                self._tell(number, state=states.PRUNED)
                self.log(f"trial {number}: pruned at step {frozen.user_attrs['pruned_at_step']} "
                         f'({took})')
                return
            value = final_metric(claim.work_dir, self.spec.metric)
            if value is not None:
                self._tell(number, value)
                self.log(f'trial {number}: {self.spec.metric} {value:.4f} ({took})')
                return
        error = error_line(claim.work_dir) if code != 0 else (
            f"the run logged no '{self.spec.metric}' (is evaluation on?)")
        trial.set_user_attr('error', error)
        self._tell(number, state=states.FAIL)
        self.log(f'trial {number}: failed (exit status {code}, {took}): {error}')
        if code == 2 or code == 0:  # a config error: every trial would fail the same way
            self.abort = f'trial {number} failed: {error}'

    def _tell(self, number: int, *args: Any, **kwargs: Any) -> None:
        """``study.tell``; the grid sampler's "grid done" (``study.stop()``) is not an error.

        Optuna stores the trial's state before the sampler's ``after_trial`` raises it (its
        ``Study.stop`` works inside ``optimize`` only); ``--trials`` already ends the sweep.
        """
        try:
            self.study.tell(number, *args, **kwargs)
        except RuntimeError as e:
            if 'Study.stop' not in str(e):
                raise

    def _env(self, slot: int, number: int) -> Dict[str, str]:
        """The trial's environment: its CPU threads, GPUs (torchrun) or master port (Slurm).

        Threads: under Slurm ``--cpus-per-task``; else those of this machine
        (``OMP_NUM_THREADS``, or the cores this process may use) divided among the jobs.
        """
        env = dict(os.environ)
        launcher, g = self.spec.launcher, self.spec.gpus_per_trial
        if launcher == 'slurm':
            threads = self.spec.cpus_per_task
            env['MASTER_PORT'] = str(master_port(self.spec, number))
        else:
            total = int(env.get('OMP_NUM_THREADS') or len(os.sched_getaffinity(0)))
            threads = max(1, total // (self.spec.jobs * (g if launcher == 'pytorch' else 1)))
        env['OMP_NUM_THREADS'] = env['MKL_NUM_THREADS'] = str(threads)
        if launcher == 'pytorch' and gpu_ids():
            env['CUDA_VISIBLE_DEVICES'] = ','.join(gpu_ids()[slot * g:(slot + 1) * g])
        return env


def gpu_ids() -> List[str]:
    """The GPUs this process may use (``CUDA_VISIBLE_DEVICES`` or all of them)."""
    visible = os.environ.get('CUDA_VISIBLE_DEVICES')
    if visible is not None:
        return [d for d in visible.split(',') if d.strip()]
    return [str(i) for i in range(torch.cuda.device_count())]
