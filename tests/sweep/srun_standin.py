"""A stand-in for Slurm's ``srun`` on one machine, for tests where no Slurm exists.

It reads the options the sweep passes (``--ntasks``, ``--ntasks-per-node``,
``--job-name``, ``--cpus-per-task``; others are accepted and ignored), starts
``--ntasks`` copies of the command with the variables srun gives each task
(``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``, ``SLURM_NODELIST``, ...), passes
SIGTERM and SIGINT on to every task, ends the others when one fails
(``--kill-on-bad-exit=1``) and exits with the worst status. Not simulated: allocation,
``--gres``, several nodes, srun's own signal protocol.
"""

import os
import signal
import subprocess
import sys
import time


def parse(argv):
    options, i = {}, 0
    while i < len(argv) and argv[i].startswith('-'):
        if argv[i] == '-p':
            options['partition'], i = argv[i + 1], i + 2
            continue
        name, _, value = argv[i].lstrip('-').partition('=')
        options[name] = value
        i += 1
    return options, argv[i:]


def main(argv):
    options, command = parse(argv)
    ntasks = int(options.get('ntasks', 1))
    per_node = int(options.get('ntasks-per-node', ntasks))
    env = dict(os.environ, SLURM_NTASKS=str(ntasks), SLURM_NODELIST='localhost',
               SLURM_JOB_NAME=options.get('job-name', 'standin'),
               SLURM_CPUS_PER_TASK=options.get('cpus-per-task', '1'))
    tasks = [subprocess.Popen(command, env=dict(env, SLURM_PROCID=str(rank),
                                                SLURM_LOCALID=str(rank % per_node)))
             for rank in range(ntasks)]
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: [t.send_signal(signum) for t in tasks])
    while any(t.poll() is None for t in tasks):
        if options.get('kill-on-bad-exit') == '1' and any(t.poll() for t in tasks):
            for t in tasks:
                if t.poll() is None:
                    t.kill()
        time.sleep(0.05)
    return max(t.returncode if t.returncode >= 0 else 128 - t.returncode for t in tasks)


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
