"""The fork server that starts trials: a trial is a process of its own, as if run afresh."""

import os
import subprocess
import sys

import pytest

from sweep_helpers import ROOT, TIMEOUT

pytestmark = pytest.mark.slow

# A stand-in for tools/train.py: says what it sees, holds until told, exits as asked.
SCRIPT = '''
import os, signal, sys, time
terms = []
signal.signal(signal.SIGTERM, lambda *a: terms.append(1))
print('argv', sys.argv[1:], 'cwd', os.getcwd(), 'X', os.environ.get('X'), flush=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.01)
time.sleep(0.3)  # SIGTERMs sent meanwhile arrive
print('terms', len(terms), flush=True)
sys.exit(int(sys.argv[1]))
'''

# The sweep's side, in a fresh process (the server must be forked from one thread).
DRIVER = '''
import fcntl, importlib, os, signal, sys, time, types
# mtrain/sweep/forkserver.py without importing mtrain (torch): it needs the standard library.
package = types.ModuleType('sweep_modules')
package.__path__ = [os.path.join(os.environ['MTRAIN_ROOT'], 'mtrain', 'sweep')]
sys.modules['sweep_modules'] = package
ForkServer = importlib.import_module('sweep_modules.forkserver').ForkServer

script, work = sys.argv[1], sys.argv[2]
server = ForkServer.start(script, preload=False)
def locked_elsewhere(path):
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
def launch(name, code, env):
    folder = os.path.join(work, name)
    os.makedirs(folder)
    lock = os.open(os.path.join(folder, '.lock'), os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)
    trial = server.launch([sys.executable, script, str(code), os.path.join(folder, 'go')],
                          folder, env, lock)
    os.close(lock)  # the sweep's copy; the trial's keeps the lock
    return trial, folder
a, fa = launch('a', 3, dict(os.environ, X='1'))
b, fb = launch('b', 0, dict(os.environ, X='2'))
c, fc = launch('c', 0, dict(os.environ))
time.sleep(0.5)
print('held', locked_elsewhere(os.path.join(fa, '.lock')), a.poll())
b.send_signal(signal.SIGTERM)
b.send_signal(signal.SIGTERM)  # once only: a second would stop a training run unsaved
c.send_signal(signal.SIGTERM)
time.sleep(0.2)  # (two signals sent at once may arrive as one, as Unix signals do)
c.send_signal(signal.SIGUSR1)  # the second Ctrl-C: a second SIGTERM
for f in (fa, fb, fc):
    open(os.path.join(f, 'go'), 'w').close()
print('codes', a.wait(), b.wait(), c.wait())
print('released', not locked_elsewhere(os.path.join(fa, '.lock')))
server.close()
'''


def test_trials_get_their_arguments_environment_output_lock_signals_and_status(tmp_path):
    (tmp_path / 'script.py').write_text(SCRIPT)
    (tmp_path / 'driver.py').write_text(DRIVER)
    work = tmp_path / 'work'
    result = subprocess.run([sys.executable, str(tmp_path / 'driver.py'),
                             str(tmp_path / 'script.py'), str(work)], cwd=str(tmp_path),
                            capture_output=True, text=True, timeout=TIMEOUT,
                            env=dict(os.environ, MTRAIN_ROOT=ROOT))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == ['held True None', 'codes 3 0 0', 'released True']
    outputs = {name: (work / name / 'train.out').read_text().splitlines() for name in 'abc'}
    assert outputs['a'][0] == f"argv ['3', '{work}/a/go'] cwd {tmp_path} X 1"
    assert outputs['b'][0].endswith('X 2') and outputs['c'][0].endswith('X None')
    assert [out[1] for out in outputs.values()] == ['terms 0', 'terms 1', 'terms 2']
