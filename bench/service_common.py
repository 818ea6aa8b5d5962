"""What the service benchmarks share: the token they configure, a PostgreSQL database of
their own on 127.0.0.1:5432, percentiles and a process's peak memory."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

TOKEN = "local-token"
HEADERS = {"Authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


@contextmanager
def postgres_database(prefix: str = "cpsched_bench") -> Iterator[str]:
    """The URL of a new PostgreSQL database, dropped afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def rss_mb(pid: int) -> float:
    """The process's resident memory now (VmRSS), MB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) / 1024


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident memory (VmHWM), MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")
