"""Engines and sessions for SQLite (the default: one file, WAL mode) or PostgreSQL."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from cpsched.errors import ConfigError


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite files get WAL, a busy timeout and foreign keys."""
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
        engine = create_engine(parsed, connect_args={"timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    if parsed.get_backend_name() != "postgresql":
        raise ConfigError(
            f"database {parsed.get_backend_name()!r} is not supported: use sqlite or postgresql"
        )
    return create_engine(parsed, pool_pre_ping=True, pool_size=8, max_overflow=8)


def check_reachable(engine: Engine) -> None:
    """Connect once: an unreachable database is a one-line ConfigError naming it (password
    hidden) and the driver's reason, not a traceback."""
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except DBAPIError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__
        raise ConfigError(
            f"cannot reach the database {engine.url.render_as_string(hide_password=True)}: "
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


def make_sessions(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)
