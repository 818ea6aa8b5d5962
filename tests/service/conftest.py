"""Service test fixtures: a fresh database per test on SQLite, and for tests marked
``postgres`` on the tests' own PostgreSQL server (``postgres_server`` in tests/conftest.py:
started in a temporary folder on a free port; CI fails if PostgreSQL is not installed)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from cpsched.service.app import create_app
from cpsched.service.settings import load_settings
from tests.dbservers import PostgresServer

TOKEN = "test-token-all"
TOKEN_A = "test-token-only-a"
TOKEN_READ = "test-token-read-only"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh database on the tests' PostgreSQL, dropped after the test."""
    name = f"cpsched_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server.admin_url, autocommit=True, connect_timeout=10) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield postgres_server.url(name)
    finally:
        with psycopg.connect(postgres_server.admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'cpsched.db'}"
    return request.getfixturevalue("postgres_url")


def settings_for(database_url: str, **overrides: Any) -> Any:
    base: dict[str, Any] = {
        "database_url": database_url,
        "upgrade_on_start": True,
        "tokens": [
            {"name": "all", "secret": TOKEN, "clusters": ["*"]},
            {"name": "only-a", "secret": TOKEN_A, "clusters": ["a"]},
            {"name": "viewer", "secret": TOKEN_READ, "clusters": ["*"], "read_only": True},
        ],
        "max_body_bytes": 200_000,
        # These tests check the service, not the dispatcher: EASY keeps their decisions
        # checkable by hand (test_default_policy_answers_with_hcp3 covers the default).
        # The default's wait bound stays: only jobs that have waited 6 h get a guarantee.
        "defaults": {"dispatcher": "easy", **overrides.pop("defaults", {})},
    }
    base.update(overrides)
    return load_settings(None, **base)


@pytest.fixture
def make_client(database_url: str) -> Iterator[Callable[..., TestClient]]:
    clients: list[TestClient] = []

    def make(**overrides: Any) -> TestClient:
        client = TestClient(create_app(settings_for(database_url, **overrides)))
        client.__enter__()  # runs the lifespan (predictor rebuild)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client()


def node(name: str, cpu: int = 4, mem: int = 8000, **extra: int) -> dict[str, Any]:
    return {"name": name, "resources": {"cpu": cpu, "mem": mem, **extra}}


def job(
    job_id: str, *, submit: int = 0, limit: int = 600, units: int = 1, **per_unit: int
) -> dict[str, Any]:
    return {
        "id": job_id,
        "user": "alice",
        "submit": submit,
        "time_limit": limit,
        "units": units,
        "per_unit": per_unit or {"cpu": 1},
    }


def snapshot(
    time: int = 1000,
    nodes: list | None = None,
    running: list | None = None,
    queued: list | None = None,
) -> dict[str, Any]:
    return {
        "time": time,
        "nodes": nodes if nodes is not None else [node("n1"), node("n2", gpu=2)],
        "running": running or [],
        "queued": queued or [],
    }


def finished(
    job_id: str, start: int, end: int, *, user: str = "alice", state: str = "completed"
) -> dict[str, Any]:
    return {**job(job_id), "user": user, "start": start, "end": end, "state": state}
