"""The tests' own database servers (tests/dbservers.py) are theirs: started in a temporary
folder on a free port, not a server the machine happens to run."""

from __future__ import annotations

import os
import subprocess

import psycopg
import pytest

from tests.dbservers import HOST, MariadbServer, PostgresServer, mariadb_bin


@pytest.mark.postgres
def test_postgres_server_is_the_tests_own(postgres_server: PostgresServer):
    if os.environ.get("CPSCHED_TEST_POSTGRES"):
        pytest.skip("CPSCHED_TEST_POSTGRES names another server")
    with psycopg.connect(postgres_server.admin_url, connect_timeout=10) as conn:
        row = conn.execute(
            "SELECT current_setting('data_directory'), current_setting('port')"
        ).fetchone()
    assert row is not None
    data_dir, port = row
    assert data_dir == str(postgres_server.data_dir)
    assert int(port) == postgres_server.port
    assert (postgres_server.host, postgres_server.user) == (HOST, "postgres")


def test_mariadb_server_is_the_tests_own_and_takes_root_over_tcp(mariadb_server: MariadbServer):
    _, _, client = mariadb_bin()  # the fixture has checked that it is there
    # As the Slurm test bed's slurmdbd logs in: root, no password, over TCP.
    query = "CREATE DATABASE slurm_tb_check; SELECT @@datadir, @@port, CURRENT_USER()"
    # --skip-ssl: the server has no TLS, which newer clients (Debian 13's) require by default.
    where = ["--skip-ssl", "-h", mariadb_server.host, "-P", str(mariadb_server.port), "-u", "root"]
    answer = subprocess.run(
        [str(client), "--no-defaults", *where, "--batch", "--skip-column-names", "-e", query],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    data_dir, port, user = answer.stdout.split()
    assert data_dir.rstrip("/") == str(mariadb_server.data_dir)
    assert int(port) == mariadb_server.port
    assert user == "root@127.0.0.1"
    assert mariadb_server.env == {"MARIADB_HOST": HOST, "MARIADB_PORT": str(port)}
