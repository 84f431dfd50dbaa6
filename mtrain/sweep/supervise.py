"""Run one trial's command and stop it cleanly when the sweep worker that started it dies.

Run as a script, between a sweep worker and its training run (standard library only,
so it starts in milliseconds)::

    python supervise.py SWEEP_PID COMMAND...

Linux sends this process SIGTERM when the sweep dies, even by SIGKILL
(``PR_SET_PDEATHSIG``). The kernel sends that signal again each time the process is
handed to another dying thread of the sweep, so it cannot go to the training run as
it is: ``tools/train.py`` takes a second SIGTERM as "stop at once, no checkpoint".
This supervisor passes exactly one SIGTERM on (the run finishes its iteration, saves a
checkpoint and exits, as on preemption; torchrun passes it to every rank) and exits
with the run's status. SIGUSR1 (the sweep's answer to a second Ctrl-C) passes another
SIGTERM on, which stops the run at once. Elsewhere than Linux the run simply goes on when
the sweep dies. The trial's lock (an inherited descriptor) is passed to the run, so it
is held while either process lives.
"""

import ctypes
import os
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1


def term_when_parent_dies() -> None:
    """Linux: SIGTERM to this process when its parent (thread) ends."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (AttributeError, OSError):
        pass


def main(argv: list) -> int:
    parent, command = int(argv[0]), argv[1:]
    state = {'child': None, 'stopping': False}

    def forward(signum: int, frame: object) -> None:
        if not state['stopping'] and state['child'] is not None:
            state['child'].send_signal(signal.SIGTERM)
        state['stopping'] = True

    def now(signum: int, frame: object) -> None:  # the sweep's second Ctrl-C: stop at once
        state['stopping'] = True
        if state['child'] is not None:
            state['child'].send_signal(signal.SIGTERM)  # its second SIGTERM

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGUSR1, now)
    term_when_parent_dies()
    if os.getppid() != parent:  # the sweep died before the line above
        return 128 + signal.SIGTERM
    inherited = tuple(int(fd) for fd in os.environ.get('MTRAIN_SWEEP_FDS', '').split(',') if fd)
    # The run, too, gets SIGTERM if this process is killed (it has one thread: one signal).
    state['child'] = subprocess.Popen(command, pass_fds=inherited,
                                      preexec_fn=term_when_parent_dies)
    if state['stopping']:  # a signal came while it started
        state['child'].send_signal(signal.SIGTERM)
    code = state['child'].wait()
    return 128 - code if code < 0 else code


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
