"""Two workers on one study in a real database server (the storage for many machines).

PostgreSQL: ``pgserver``'s server (PostgreSQL's own binaries in a pip package) with the
``psycopg`` driver (SQLAlchemy 2.1's for ``postgresql://``). MySQL: a MariaDB server from
the system's packages (``mariadbd``, ``mariadb-install-db``) with the ``pymysql`` driver.
Each server is started in a temporary folder, listening on a Unix socket only; where its
packages are missing its test is skipped, saying which to install.
"""

import os
import shutil
import subprocess
import time

import pytest

from sweep_helpers import check_shared, run_workers, sweep_command

optuna = pytest.importorskip('optuna')

pytestmark = pytest.mark.slow


@pytest.fixture(scope='module')
def postgresql(tmp_path_factory):
    """A PostgreSQL server of this module's own; its URL."""
    pgserver = pytest.importorskip(
        'pgserver', reason="a PostgreSQL server for the test: pip install pgserver")
    pytest.importorskip('psycopg', reason="PostgreSQL's driver: pip install 'psycopg[binary]'")
    server = pgserver.get_server(str(tmp_path_factory.mktemp('pg')), cleanup_mode='stop')
    yield server.get_uri()
    server.cleanup()


@pytest.fixture(scope='module')
def mysql(tmp_path_factory):
    """A MariaDB (MySQL) server of this module's own, with a database ``sweeps``; its URL."""
    pymysql = pytest.importorskip('pymysql', reason="MySQL's driver: pip install pymysql")
    server, install = shutil.which('mariadbd'), shutil.which('mariadb-install-db')
    if not (server and install):
        pytest.skip('a MySQL server for the test: apt-get install mariadb-server')
    folder = tmp_path_factory.mktemp('mysql')
    socket, user = str(folder / 'sock'), ['--user=root'] if os.geteuid() == 0 else []
    subprocess.run([install, '--no-defaults', f'--datadir={folder}/data', *user,
                    '--auth-root-authentication-method=normal', '--skip-test-db'],
                   check=True, capture_output=True, timeout=120)
    proc = subprocess.Popen([server, '--no-defaults', f'--datadir={folder}/data', *user,
                             f'--socket={socket}', '--skip-networking',
                             f'--log-error={folder}/error.log'])
    try:
        deadline = time.time() + 60
        while not os.path.exists(socket):
            assert proc.poll() is None and time.time() < deadline, (
                folder / 'error.log').read_text()[-2000:]
            time.sleep(0.1)
        with pymysql.connect(user='root', unix_socket=socket) as connection:
            connection.cursor().execute('CREATE DATABASE sweeps')
        yield f'mysql+pymysql://root@localhost/sweeps?unix_socket={socket}'
    finally:
        proc.terminate()
        proc.wait(timeout=60)


@pytest.mark.parametrize('database', ['postgresql', 'mysql'])
def test_two_workers_share_a_study_in_a_database_server(database, request, tmp_path):
    url = request.getfixturevalue(database)
    sweep_dir = str(tmp_path / 'sweep')
    command = sweep_command(sweep_dir, "space = {'optimizer.lr': loguniform(0.01, 0.3)}",
                            '--trials', '3', '--pruner', 'none', '--storage', url,
                            '--study', 'db', options=['runner.max_epochs=1'])
    outputs = run_workers(command)
    assert all(f'storage {url}' in out for out in outputs)
    study = optuna.load_study(study_name='db', storage=url)
    check_shared(outputs, study.trials, 3)
    assert all(list(t.intermediate_values) == [1] for t in study.trials)  # the hook reported
