"""Start each trial as a fork of a process that has imported the training code once.

A trial is ``python tools/train.py ...``; most of a short trial's start is importing
torch, mtrain and what building an optimizer pulls in (``torch._dynamo``): seconds per
trial. ``tools/sweep.py`` therefore, as its first act, imports the training script's
modules (and sets up what a run sets up first) and forks a *fork server*, while it is one
thread that has imported but not computed anything; each trial is then a fork of the
server that runs the script as
``__main__`` with the trial's arguments, environment, working directory and output file:
a process of its own, as before, that starts in milliseconds.

What a trial sees as if it were started afresh: ``sys.argv``, ``os.environ`` (set before
the script runs; the thread count is applied with ``torch.set_num_threads``), the
working directory, its own session, stdout/stderr appended to ``train.out``, and
exit statuses as a shell reports them (``128 + signal``). What it shares with the
server: modules imported before the fork, so environment variables that torch reads
*at import* come from the sweep's environment. ``--no-fork`` starts each trial as a
fresh process instead (:func:`mtrain.sweep.trial.start_trial`).

Crash safety is that of :mod:`mtrain.sweep.supervise`, which the server replaces: the
server gets SIGTERM when the sweep dies (``PR_SET_PDEATHSIG``, possibly once per dying
thread) and its socket to the sweep ends; it passes exactly one SIGTERM to each running
trial (which then saves a checkpoint), waits for them and exits. A trial gets SIGTERM
once if the server itself is killed. The sweep's second Ctrl-C sends a second SIGTERM
(stop at once). Each trial inherits its lock (:mod:`mtrain.sweep.claims`), passed to the
server over a Unix socket.
"""

import atexit
import importlib
import json
import os
import os.path as osp
import runpy
import select
import signal
import socket
import sys
import threading
import time
import traceback
from typing import Any, Dict, List, Optional

from .supervise import term_when_parent_dies

_MAX_MESSAGE = 1 << 20  # bytes: a trial's argv and environment


class ForkedTrial:
    """A trial run by the fork server: the part of ``subprocess.Popen`` the sweep uses.

    ``lost`` is True when the server died before the trial's end was known.
    """

    def __init__(self, server: 'ForkServer', key: int) -> None:
        self._server, self._key = server, key
        self._done = threading.Event()
        self.returncode: Optional[int] = None
        self.lost = False

    def poll(self) -> Optional[int]:
        return self.returncode

    def wait(self) -> int:
        self._done.wait()
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """SIGTERM: stop as on preemption (once); SIGUSR1: a second SIGTERM (stop at once)."""
        if not self._done.is_set():
            self._server.send({'op': 'signal', 'key': self._key, 'sig': int(sig)})

    def _end(self, code: int, lost: bool = False) -> None:
        self.returncode, self.lost = code, lost
        self._done.set()


class ForkServer:
    """The sweep's side: starts trials on the server and learns how they ended.

    Use :meth:`start`; it returns None where forking is not safe (another thread is
    running, CUDA is initialized, not Linux), and the sweep starts fresh processes.
    """

    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid, self._sock = pid, sock
        self._trials: Dict[int, ForkedTrial] = {}
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, name='mtrain-forkserver', daemon=True)
        self._reader.start()

    @classmethod
    def start(cls, train_script: str, preload: bool = True) -> Optional['ForkServer']:
        """Fork the server (call while this process is one thread that has not computed).

        ``preload``: import what a training run needs first (:func:`_preload`), here, before
        the fork: the sweep needs most of it too (its SPACE check builds an optimizer, it
        opens the study), and the server and every trial inherit it.
        """
        if preload:
            _preload(train_script)
        torch = sys.modules.get('torch')
        if (not sys.platform.startswith('linux') or threading.active_count() > 1
                or (torch is not None and torch.cuda.is_initialized())):
            return None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the server: never returns
            ours.close()
            code = 1
            try:
                code = _Server(theirs, parent, train_script).serve()
            except BaseException:  # noqa: BLE001
                traceback.print_exc()
            finally:
                os._exit(code)
        theirs.close()
        return cls(pid, ours)

    def launch(self, command: List[str], work_dir: str, env: Dict[str, str],
               lock_fd: int) -> ForkedTrial:
        """Run ``command`` (``[python, train.py, args...]``) as a fork, output to ``train.out``."""
        with self._lock:
            key = len(self._trials)
            trial = self._trials[key] = ForkedTrial(self, key)
        message = {'op': 'start', 'key': key, 'argv': command[1:], 'env': env,
                   'cwd': os.getcwd(), 'out': osp.join(work_dir, 'train.out')}
        self.send(message, [lock_fd])
        return trial

    def send(self, message: Dict[str, Any], fds: List[int] = ()) -> None:
        try:
            socket.send_fds(self._sock, [json.dumps(message).encode()], list(fds))
        except OSError:
            pass  # the server is gone; the reader marks the trials lost

    def close(self) -> None:
        """End the server (it waits for running trials) and reap it."""
        self._sock.shutdown(socket.SHUT_RDWR)
        os.waitpid(self.pid, 0)
        self._reader.join()
        self._sock.close()

    def _read(self) -> None:
        while True:
            try:
                data = self._sock.recv(_MAX_MESSAGE)
            except OSError:
                data = b''
            if not data:
                break
            message = json.loads(data)
            self._trials[message['key']]._end(message['code'])
        with self._lock:
            for trial in self._trials.values():
                if trial.returncode is None:
                    trial._end(-1, lost=True)


class _Server:
    """The fork server's loop (one thread): start trials, pass signals on, report ends."""

    def __init__(self, sock: socket.socket, parent: int, train_script: str) -> None:
        self.sock, self.parent, self.train_script = sock, parent, train_script
        self.children: Dict[int, List[int]] = {}  # pid -> [key, SIGTERMs sent]
        self.pids: Dict[int, int] = {}  # key -> pid
        self.orphaned = False

    def serve(self) -> int:
        os.setsid()  # signals to the sweep's process group (Ctrl-C) are the sweep's to pass on
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, self._on_parent_death)
        term_when_parent_dies()
        if os.getppid() != self.parent:
            return 1
        while not (self.orphaned and not self.children):
            if self.orphaned:
                self._term_all()
            elif select.select([self.sock], [], [], 0.05)[0]:
                self._receive()
            self._reap()
        return 0

    def _on_parent_death(self, signum: int, frame: Any) -> None:
        self.orphaned = True

    def _term_all(self) -> None:
        """The sweep is gone: one SIGTERM to each run that has had none, then wait."""
        for pid, entry in self.children.items():
            if entry[1] == 0:
                self._kill(pid, entry)
        time.sleep(0.05)

    def _receive(self) -> None:
        try:
            data, fds, _, _ = socket.recv_fds(self.sock, _MAX_MESSAGE, 4)
        except OSError:
            data, fds = b'', []
        if not data:
            self.orphaned = True
            return
        message = json.loads(data)
        if message['op'] == 'start':
            self._fork(message, fds)
        elif message['op'] == 'signal':
            pid = self.pids.get(message['key'])
            if pid in self.children and (message['sig'] == signal.SIGUSR1
                                         or self.children[pid][1] == 0):
                self._kill(pid, self.children[pid])

    @staticmethod
    def _kill(pid: int, entry: List[int]) -> None:
        entry[1] += 1
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    def _fork(self, message: Dict[str, Any], fds: List[int]) -> None:
        pid = os.fork()
        if pid == 0:
            _run_trial(message, self.sock, self.train_script)  # never returns
        for fd in fds:
            os.close(fd)  # the trial holds the lock now (and the sweep's worker, its copy)
        self.children[pid] = [message['key'], 0]
        self.pids[message['key']] = pid

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            key, _ = self.children.pop(pid)
            code = os.waitstatus_to_exitcode(status)
            code = 128 - code if code < 0 else code  # as a shell reports a signal
            try:
                self.sock.send(json.dumps({'key': key, 'code': code}).encode())
            except OSError:
                pass  # the sweep is gone


def _preload(train_script: str) -> None:
    """What every trial would import or set up first: the script's modules, ``torch._dynamo``
    (building an optimizer imports it) and Optuna's database layer (the pruning hook's)."""
    runpy.run_path(train_script, run_name='mtrain_sweep_preload')
    __import__('torch._dynamo')
    optuna = importlib.import_module('optuna')
    storage = optuna.storages.RDBStorage('sqlite:///:memory:')  # SQLAlchemy's models set up
    storage.engine.dispose()


def _run_trial(message: Dict[str, Any], sock: socket.socket, train_script: str) -> None:
    """In the forked trial: become ``python train.py ARGS`` and exit with its status."""
    code = 1
    try:
        sock.close()
        os.setsid()
        for sig in (signal.SIGTERM, signal.SIGUSR1):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        server = os.getppid()
        term_when_parent_dies()  # the server is one thread: one SIGTERM if it is killed
        if os.getppid() != server:
            os._exit(128 + signal.SIGTERM)
        _redirect_output(message['out'])
        os.chdir(message['cwd'])
        os.environ.clear()
        os.environ.update(message['env'])
        threads, torch = message['env'].get('OMP_NUM_THREADS'), sys.modules.get('torch')
        if threads and torch is not None:
            torch.set_num_threads(int(threads))
        sys.argv = list(message['argv'])
        sys.path[0] = osp.dirname(osp.abspath(train_script))
        runpy.run_path(train_script, run_name='__main__')
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, (int, type(None))):
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001  (as the interpreter reports an uncaught one)
        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()  # noqa: SLF001  (what a normal interpreter exit runs)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _redirect_output(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = sys.__stdout__ = open(1, 'w', closefd=False)
    sys.stderr = sys.__stderr__ = open(2, 'w', buffering=1, closefd=False)

