"""Two workers on one study in a real PostgreSQL server (the storage for many machines).

The server is ``pgserver``'s (PostgreSQL's own binaries in a pip package, started in a
temporary folder); SQLAlchemy 2.1 reaches ``postgresql://`` through ``psycopg``. Without
them the test is skipped: ``pip install pgserver 'psycopg[binary]'``.
"""

import pytest

from sweep_helpers import check_shared, run_workers, sweep_command

pgserver = pytest.importorskip(
    'pgserver', reason="a real PostgreSQL for the test: pip install pgserver 'psycopg[binary]'")
pytest.importorskip('psycopg', reason="PostgreSQL's driver: pip install 'psycopg[binary]'")
optuna = pytest.importorskip('optuna')

pytestmark = pytest.mark.slow


@pytest.fixture(scope='module')
def postgresql(tmp_path_factory):
    """A PostgreSQL server of this test's own; its URL (a Unix socket in its folder)."""
    server = pgserver.get_server(str(tmp_path_factory.mktemp('pg')), cleanup_mode='stop')
    yield server.get_uri()
    server.cleanup()


def test_two_workers_share_a_study_in_postgresql(postgresql, tmp_path):
    sweep_dir = str(tmp_path / 'sweep')
    command = sweep_command(sweep_dir, "space = {'optimizer.lr': loguniform(0.01, 0.3)}",
                            '--trials', '3', '--pruner', 'none', '--storage', postgresql,
                            '--study', 'pg', options=['runner.max_epochs=1'])
    outputs = run_workers(command)
    assert all(f'storage {postgresql}' in out for out in outputs)
    study = optuna.load_study(study_name='pg', storage=postgresql)
    check_shared(outputs, study.trials, 3)
    assert all(list(t.intermediate_values) == [1] for t in study.trials)  # the hook reported
