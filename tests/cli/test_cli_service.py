"""``cpsched db`` and ``cpsched serve`` as a sysadmin runs them: real processes."""

from __future__ import annotations

import socket
import subprocess
import sys

import httpx
import pytest

from cpsched.cli.local_service import local_service


def cpsched(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cpsched.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_db_upgrade_current_downgrade(tmp_path):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    assert "empty" in cpsched("db", "current", "--database-url", url).stdout
    upgraded = cpsched("db", "upgrade", "--database-url", url)
    assert upgraded.returncode == 0, upgraded.stderr
    assert "(current)" in cpsched("db", "current", "--database-url", url).stdout
    assert "base" in cpsched("db", "downgrade", "base", "--database-url", url).stdout


def test_serve_refuses_an_out_of_date_schema(tmp_path):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    assert cpsched("db", "upgrade", "--database-url", url, "--revision", "0001").returncode == 0
    result = cpsched("serve", "--database-url", url)
    assert result.returncode == 2
    assert "cpsched db upgrade" in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_and_db_say_in_one_line_that_the_database_is_unreachable(tmp_path):
    url = "postgresql+psycopg://cpsched:secret-pw@127.0.0.1:1/cpsched"
    for args in (("serve",), ("db", "upgrade"), ("db", "current")):
        result = cpsched(*args, "--database-url", url)
        assert result.returncode == 2
        assert "Traceback" not in result.stderr
        assert "cannot reach the database" in result.stderr
        assert "secret-pw" not in result.stderr  # the password is hidden
        assert len(result.stderr.strip().splitlines()) <= 2, result.stderr


def test_serve_refuses_a_bad_config(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("[defaults]\ndispatcher = 'quantum'\n")
    result = cpsched("serve", "--config", config, "--upgrade")
    assert result.returncode == 2
    assert "quantum" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("http", ["httptools", "h11"])
def test_serve_refuses_an_unauthenticated_body_and_keeps_serving(tmp_path, http):
    """A 5 MB body without a token gets its 401 over a real socket, with either parser,
    and the service answers the next request at once."""
    with local_service(tmp_path, serve_args=("--http", http)) as service:
        size = 5_000_000
        head = (
            f"POST /v1/clusters/x/dispatch HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {size}\r\n\r\n"
        ).encode()
        with socket.create_connection(("127.0.0.1", service.port), timeout=30) as sock:
            sock.sendall(head + b" " * size)
            assert sock.recv(64).startswith(b"HTTP/1.1 401 ")
        assert httpx.get(f"{service.url}/healthz", timeout=5).status_code == 200
