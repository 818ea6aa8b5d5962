"""Fixtures shared by every test package."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from tests import dbservers
from tests.dbservers import MariadbServer, PostgresServer

REPO = Path(__file__).resolve().parents[1]
Server = TypeVar("Server")


def required(what: str, reason: str) -> None:
    """What a test needs is not installed: skipped locally, a failure in CI (``CI`` set)."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} is required in CI: {reason}", pytrace=False)
    pytest.skip(reason)


def _serving(
    what: str, start: Callable[[], contextlib.AbstractContextManager[Server]]
) -> Iterator[Server]:
    """Yield the started server, then stop it; not installed: see ``required``; installed
    but not starting: a failure with the server's log (for every test that asks for it)."""
    try:
        with start() as server:
            yield server
            return
    except (dbservers.Missing, dbservers.StartFailed) as problem:
        trouble = problem  # reported outside the except: no "during handling" chain
    if isinstance(trouble, dbservers.Missing):
        required(what, str(trouble))
    pytest.fail(str(trouble), pytrace=False)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL of the tests' own (tests/dbservers.py), one per session (per xdist
    worker): user ``postgres``, no password, 127.0.0.1 and a free port. The tests create
    and drop their databases on it. CPSCHED_TEST_POSTGRES (a postgresql:// URL of a
    superuser's maintenance database) uses that server instead."""
    given = os.environ.get("CPSCHED_TEST_POSTGRES")
    if given:
        yield PostgresServer.from_url(given)
        return
    yield from _serving("PostgreSQL", dbservers.postgres)


@pytest.fixture(scope="session")
def mariadb_server() -> Iterator[MariadbServer]:
    """A MariaDB of the tests' own, one per session (per xdist worker): ``root`` with no
    password over TCP at ``host`` (127.0.0.1) and ``port`` (free, chosen at start);
    ``env`` gives them as MARIADB_HOST and MARIADB_PORT for the Slurm test bed.
    CPSCHED_TEST_MARIADB (``host:port``, root with no password) uses that server instead:
    ``python -m tests.dbservers mariadb -- ...`` starts one for a command and sets it."""
    given = os.environ.get("CPSCHED_TEST_MARIADB")
    if given:
        host, _, port = given.rpartition(":")
        yield MariadbServer(host, int(port), socket=Path(), data_dir=Path())
        return
    yield from _serving("MariaDB", dbservers.mariadb)


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    """The real SWF traces: ``../shared/data/traces`` beside the clone (CI has them)."""
    path = Path(os.environ.get("CPSCHED_TRACES", REPO.parent / "shared" / "data" / "traces"))
    if not path.is_dir():
        pytest.fail(f"real traces not found at {path}; set CPSCHED_TRACES")
    return path


@pytest.fixture(scope="session")
def dask_installed() -> None:
    """Dask, which the [sweep] extra installs, is there (see ``required``)."""
    try:
        import distributed  # noqa: F401
    except ModuleNotFoundError as missing:
        required(
            "Dask",
            f"the [sweep] extra is not installed ({missing.name}): pip install 'cpsched[sweep]'",
        )


SMALL_SWF = """\
; Small hand-written trace for CLI tests
; MaxNodes: 4
; MaxProcs: 8
"""


@pytest.fixture
def small_trace(tmp_path: Path) -> Path:
    """40 jobs on 4 nodes x 2 cores, plus one broken line and one job too big."""
    lines = [SMALL_SWF]
    for i in range(1, 41):
        submit = i * 30
        run = 50 + (i * 37) % 400
        procs = 1 + (i * 5) % 6
        requested = run * (1 + i % 4)
        fields = [
            i,
            submit,
            -1,
            run,
            procs,
            -1,
            -1,
            procs,
            requested,
            -1,
            1,
            i % 3,
            1,
            -1,
            1,
            -1,
            -1,
            -1,
        ]
        lines.append(" ".join(map(str, fields)) + "\n")
    lines.append("41 1300 this line is broken\n")
    lines.append("42 1310 -1 100 64 -1 -1 64 200 -1 1 1 1 -1 1 -1 -1 -1\n")
    path = tmp_path / "small.swf"
    path.write_text("".join(lines))
    return path
