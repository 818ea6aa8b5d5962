"""Engines and sessions for SQLite (the default: one file, WAL mode) or PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from cpsched.errors import ConfigError

T = TypeVar("T")

LOCK_TIMEOUT_MS = 2000
"""PostgreSQL: longest wait for a lock before the statement fails (a 503)."""
STATEMENT_TIMEOUT_MS = 120_000
"""PostgreSQL: longest statement (the predictor's rebuild reads the whole history)."""
POOL_TIMEOUT_S = 5
"""Longest wait for a pooled connection."""
SQLITE_BUSY_TIMEOUT_S = 5
"""SQLite: longest wait for another writer (a dispatch waits less: :func:`lock_wait`)."""
LEAST_LOCK_WAIT_S = 0.15
"""The least a dispatch's write waits for a lock: what another writer's ordinary
transaction (a slice of finished jobs, a retention batch) may hold it for."""


def make_engine(url: str, *, pool_size: int = 8) -> Engine:
    """An engine for ``url``; SQLite files get WAL, a busy timeout and foreign keys.
    ``pool_size``: PostgreSQL connections kept (as many again may open under load; with
    1, exactly one: the health checks' own engine)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ConfigError(
            f"database URL {url!r} is not valid: use sqlite:///PATH or "
            "postgresql+psycopg://USER@HOST:PORT/DB"
        ) from None
    if parsed.drivername == "postgresql":
        # psycopg 3 is what we ship; the bare scheme would look for psycopg2.
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() == "sqlite":
        _make_directory(parsed)
        engine = create_engine(parsed, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    if parsed.get_backend_name() != "postgresql":
        raise ConfigError(
            f"database {parsed.get_backend_name()!r} is not supported: use sqlite or postgresql"
        )
    # A table locked for maintenance (VACUUM FULL, ALTER TABLE) or a runaway statement
    # gives a quick error (a 503 the bridge retries), not a dispatch thread hung for the
    # lock's duration; nor does a call wait long for a pooled connection.
    timeouts = f"-c lock_timeout={LOCK_TIMEOUT_MS} -c statement_timeout={STATEMENT_TIMEOUT_MS}"
    return create_engine(
        parsed,
        pool_pre_ping=True,
        pool_size=pool_size,
        max_overflow=pool_size if pool_size > 1 else 0,
        pool_timeout=POOL_TIMEOUT_S,
        connect_args={"options": timeouts},
    )


def _sqlite_file(url: URL) -> Path | None:
    """The file of a SQLite URL (None in memory)."""
    database = url.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        return None
    return Path(database)


def _make_directory(url: URL) -> None:
    """Create a SQLite file's directory (``/var/lib/cpsched`` on a fresh machine), or say
    in one line why it cannot be and what to do."""
    path = _sqlite_file(url)
    if path is None or path.parent.is_dir():
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"the SQLite database {path} cannot be created: its directory {path.parent} does "
            f"not exist and cannot be made ({exc.strerror or exc}); create it, writable by "
            "this user, or set database_url (CPSCHED_DATABASE_URL) to a file in a writable "
            "directory, e.g. sqlite:///cpsched.db"
        ) from None


def shown(url: URL) -> str:
    """The database for a person: a SQLite file by its absolute path, any other by its URL
    with the password hidden."""
    path = _sqlite_file(url)
    if url.get_backend_name() == "sqlite" and path is not None:
        return f"SQLite {path.resolve()}"
    return url.render_as_string(hide_password=True)


def check_reachable(engine: Engine) -> None:
    """Connect once: an unreachable database is a one-line ConfigError naming it (password
    hidden) and the driver's reason, not a traceback."""
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except DBAPIError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__
        if engine.url.get_backend_name() == "sqlite":
            raise ConfigError(
                f"cannot open the database {shown(engine.url)}: {reason}; check database_url "
                "and that this user may write the file and its directory"
            ) from None
        raise ConfigError(
            f"cannot reach the database {shown(engine.url)}: "
            f"{reason}; check database_url and that the server is running"
        ) from None


def _sqlite_pragmas(dbapi_connection: Any, _record: object) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets readers (GET /jobs) run while a dispatch commits its audit row;
    # synchronous=NORMAL is durable across process crashes in WAL mode.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


@contextmanager
def lock_wait(session: Session, seconds: float) -> Iterator[None]:
    """The session's statements wait at most ``seconds`` (at least
    :data:`LEAST_LOCK_WAIT_S`) for a lock: a dispatch's writes give up by its deadline
    (a 503 the bridge retries) instead of waiting out a table locked for maintenance.
    PostgreSQL: ``SET LOCAL lock_timeout`` (this transaction only); SQLite: the
    connection's busy timeout, restored after."""
    ms = int(max(seconds, LEAST_LOCK_WAIT_S) * 1000)
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text(f"SET LOCAL lock_timeout = '{ms}ms'"))
        yield
        return
    session.execute(text(f"PRAGMA busy_timeout = {ms}"))
    try:
        yield
    finally:
        session.execute(text(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_S * 1000}"))


IN_LIST_STEP = 4096
"""Past this many values, IN lists grow by whole steps of it (see :func:`in_list`)."""


def in_list(values: Sequence[T]) -> list[T]:
    """``values`` for an ``IN (...)``, padded with its last value to a few set lengths (the
    powers of two up to :data:`IN_LIST_STEP`, then its multiples). An IN list is one
    bound parameter per value, so each length is another statement text, which each
    pooled connection prepares and keeps in its statement cache (Python's sqlite3: the
    last 128; psycopg: the last 100): retention's deletes, one length after another,
    filled those caches with large prepared statements, and the service's memory in use
    grew by about 1 MB per 400 calls (bounded only by the caches' sizes). A repeated
    value changes nothing of what ``IN`` matches."""
    if not values:
        return []
    length = 1
    while length < len(values) and length < IN_LIST_STEP:
        length *= 2
    if len(values) > IN_LIST_STEP:
        length = -(-len(values) // IN_LIST_STEP) * IN_LIST_STEP
    return [*values, *[values[-1]] * (length - len(values))]


def make_sessions(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)
