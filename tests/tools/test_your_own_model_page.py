"""docs/your_own_model_and_data.md: every code block runs, in order, in a fresh directory.

A ```python block whose first line is ``# file: PATH`` is written to PATH; any other python
block runs as a script there; a ```bash block's ``python tools/...`` lines run with this
interpreter and this checkout's tools/.
"""

import json
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGE = os.path.join(ROOT, 'docs', 'your_own_model_and_data.md')
TIMEOUT = 300  # seconds per block: a bound on a hang, generous on a loaded machine


def _blocks():
    with open(PAGE) as f:
        return re.findall(r'```(python|bash)\n(.*?)```', f.read(), re.S)


def _run(cmd, cwd):
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, f'{shlex.join(cmd)}\n{proc.stderr[-3000:]}'
    return proc


def test_every_code_block_of_the_page_runs(tmp_path):
    blocks = _blocks()
    assert len(blocks) >= 5
    for n, (lang, code) in enumerate(blocks):
        first = code.splitlines()[0]
        if lang == 'python' and first.startswith('# file: '):
            path = tmp_path / first[len('# file: '):].strip()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(code)
        elif lang == 'python':
            script = tmp_path / f'_block_{n}.py'
            script.write_text(code)
            _run([sys.executable, str(script)], tmp_path)
        else:
            for line in code.strip().splitlines():
                argv = shlex.split(line)
                assert argv[0] == 'python' and argv[1].startswith('tools/'), line
                _run([sys.executable, os.path.join(ROOT, argv[1]), *argv[2:]], tmp_path)
    [log] = [n for n in os.listdir(tmp_path / 'work_dirs' / 'blobs') if n.endswith('.log.json')]
    with open(tmp_path / 'work_dirs' / 'blobs' / log) as f:
        val = [r for r in map(json.loads, f) if r.get('mode') == 'val']
    assert len(val) == 5 and val[-1]['accuracy'] >= 0.9
