"""``python -m mtrain.compat.install --mmcv`` in a fresh venv made by the README's steps.

The venv is the README's: ``python -m venv``, torch installed (which brings
setuptools >= 81 and no ``wheel``), ``pip install -e .``. To spare a torch
download, torch and mtrain's dependencies come from this Python's
``site-packages`` through a ``.pth`` after the venv's own, and the venv's
setuptools 65 from ``ensurepip`` is removed, so setuptools is this Python's
(>= 81), as torch's install leaves it. The plain command
(``MMCV_WITH_OPS=0 pip install --no-build-isolation mmcv==1.7.2``) must fail
there with ``No module named 'pkg_resources'``, and the helper must install
mmcv and the route's start-up line. Both build mmcv from its sdist
(``--no-cache-dir``): pip's cached wheel would skip the build that fails.

It is part of the default run (about 20 s on 2 idle cores: mmcv's sdist comes
from the registry, which is the one network access the suite makes; a registry
that does not answer is a skip with its reason). ``MTRAIN_INSTALL_TEST=0``
leaves it out, e.g. offline.
"""

import os
import os.path as osp
import subprocess
import sys
import sysconfig

import pytest

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    os.environ.get('MTRAIN_INSTALL_TEST') == '0',
    reason='MTRAIN_INSTALL_TEST=0: not building mmcv 1.7.2 from the registry')]


def _run(*command, env=None):
    return subprocess.run(command, capture_output=True, text=True, env=env)


@pytest.fixture(scope='module')
def readme_venv(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('fresh'))
    base = getattr(sys, '_base_executable', sys.executable)
    assert _run(base, '-m', 'venv', root).returncode == 0
    python = osp.join(root, 'bin', 'python')
    site = _run(python, '-c', "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    with open(osp.join(site.stdout.strip(), 'zz_torch_from_here.pth'), 'w') as f:
        f.write(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    assert _run(python, '-m', 'pip', 'uninstall', '-y', 'setuptools').returncode == 0
    probe = _run(python, '-c', "import importlib.util as u; no_wheel = u.find_spec('wheel') "
                 'is None; import setuptools, torch; print(setuptools.__version__, no_wheel)')
    major = int(probe.stdout.split('.')[0])
    if major < 81 or 'True' not in probe.stdout:
        pytest.skip(f'this Python has setuptools {probe.stdout.strip()} (the README state '
                    'needs >= 81 and no wheel)')
    done = _run(python, '-m', 'pip', 'install', '-q', '-e', REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return python


def test_the_plain_command_fails_and_the_helper_installs_mmcv_and_the_route(readme_venv):
    env = dict(os.environ, MMCV_WITH_OPS='0', PIP_NO_CACHE_DIR='1')
    plain = _run(readme_venv, '-m', 'pip', 'install', '--no-build-isolation', 'mmcv==1.7.2',
                 env=env)
    if plain.returncode != 0 and 'pkg_resources' not in plain.stdout + plain.stderr:
        pytest.skip(f'the package registry did not answer: {plain.stderr.strip()[-300:]}')
    assert plain.returncode != 0
    assert "No module named 'pkg_resources'" in plain.stdout + plain.stderr

    helper = _run(readme_venv, '-m', 'mtrain.compat.install', '--mmcv',
                  env=dict(os.environ, PIP_NO_CACHE_DIR='1'))
    assert helper.returncode == 0, helper.stdout[-2000:] + helper.stderr[-2000:]
    check = _run(readme_venv, '-c', "import sys, mtrain, mmcv, mmcv.runner; print(mmcv."
                 "__version__, type(sys.modules['mmcv.runner']).__name__, mtrain.__file__)",
                 env=dict(os.environ, MTRAIN_MMCV_ROUTE='1', PYTHONPATH=''))
    assert check.returncode == 0, check.stderr[-2000:]
    version, module_type, mtrain_file = check.stdout.split()
    assert (version, module_type) == ('1.7.2', 'RoutedModule')
    assert mtrain_file == osp.join(REPO, 'mtrain', '__init__.py')  # the editable install
