"""``cpsched db`` and ``cpsched serve`` as a sysadmin runs them: real processes."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from cpsched.cli.local_service import local_service
from cpsched.service.store.database import shown

REPO = Path(__file__).resolve().parents[2]


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


@contextmanager
def serving(cwd: Path, *args: object, env: dict[str, str] | None = None) -> Iterator[list[str]]:
    """``cpsched serve --port 0 ARGS`` in ``cwd``: yields what it printed on start (its
    stderr lines up to the one that says where it listens, and a warning after it)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "cpsched.cli", "serve", "--port", "0", *map(str, args)],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stderr=subprocess.PIPE,
        text=True,
    )
    printed: list[str] = []

    def read() -> None:
        assert process.stderr is not None
        while line := process.stderr.readline():
            printed.append(line.rstrip("\n"))
            done = line.startswith("warning:") or "listening on" in line
            if done and not line.rstrip().endswith("; 0 tokens"):
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(60)
    try:
        yield printed
    finally:
        process.terminate()
        process.wait(10)
        assert process.stderr is not None
        process.stderr.close()


def test_the_readme_quick_start_serves_the_example_snapshot(tmp_path):
    """As the README says: a token made up and given in CPSCHED_TOKENS, ``cpsched serve``
    with no config (SQLite in the working directory), and examples/snapshot.json posted."""
    readme = (REPO / "README.md").read_text()
    assert ".venv/bin/cpsched serve" in readme
    assert "--data @examples/snapshot.json" in readme
    secret = "quick-start-secret"
    tokens = json.dumps([{"name": "me", "secret": secret}])
    with serving(tmp_path, env={"CPSCHED_TOKENS": tokens}) as printed:
        (started,) = printed
        match = re.fullmatch(
            r"cpsched serve: listening on (http://127\.0\.0\.1:\d+) \(API docs at \1/docs, "
            r"dashboard at \1/ui/\); database SQLite (.*); 1 token",
            started,
        )
        assert match, started
        assert match[2] == str((tmp_path / "cpsched.db").resolve())
        answer = httpx.post(
            f"{match[1]}/v1/clusters/demo/dispatch",
            content=(REPO / "examples" / "snapshot.json").read_bytes(),
            headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"},
            timeout=30,
        )
    assert answer.status_code == 200, answer.text
    assert [start["job_id"] for start in answer.json()["starts"]] == ["102", "103"]


def test_serve_creates_the_sqlite_directory_and_warns_without_tokens(tmp_path):
    database = tmp_path / "var" / "lib" / "cpsched" / "cpsched.db"
    with serving(tmp_path, "--database-url", f"sqlite:///{database}") as printed:
        assert len(printed) == 2, printed
        assert printed[0].endswith(f"; database SQLite {database}; 0 tokens")
        assert printed[1].startswith(
            "warning: no tokens configured, so every /v1 call gets 401: add a [[tokens]] table"
        )
        assert database.exists()


def test_serve_says_in_one_line_why_the_sqlite_directory_cannot_be_made(tmp_path):
    (tmp_path / "state").write_text("a file where the directory should be")
    database = tmp_path / "state" / "cpsched" / "cpsched.db"
    result = cpsched("serve", "--database-url", f"sqlite:///{database}")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: the SQLite database {database} cannot be created: its directory "
        f"{database.parent} does not exist and cannot be made (Not a directory); create it, "
        "writable by this user, or set database_url (CPSCHED_DATABASE_URL) to a file in a "
        "writable directory, e.g. sqlite:///cpsched.db"
    ]


def test_serve_refuses_a_port_it_cannot_listen_on_in_one_line(tmp_path):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    result = cpsched("serve", "--database-url", url, "--port", "99999")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: --port 99999 is not a port: give one from 1 to 65535 (0: any free)"
    ]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cpsched("serve", "--database-url", url, "--port", port)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: cannot listen on 127.0.0.1:{port}: Address already in use; another process "
        "listens there: stop it or choose another --port"
    ]


def test_a_database_is_shown_without_its_password(tmp_path):
    url = make_url("postgresql+psycopg://cpsched:secret-pw@db.example:5432/cpsched")
    assert shown(url) == "postgresql+psycopg://cpsched:***@db.example:5432/cpsched"
    assert shown(make_url("sqlite:///relative.db")) == f"SQLite {Path.cwd() / 'relative.db'}"
