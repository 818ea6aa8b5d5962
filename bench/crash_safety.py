"""Crash safety of finished-job ingestion: SIGKILL the service while batches are posted.

A poster (this process, as a bridge would) posts batches of new finished jobs and
retries a batch until it is acknowledged; meanwhile the service is killed with SIGKILL
at random moments and restarted. At the end every acknowledged job must be stored
exactly once, and nothing may be stored that was never sent. Run against SQLite and
the real PostgreSQL:

    .venv/bin/python bench/crash_safety.py [--kills 10] [--batch 200]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
import psycopg
from sqlalchemy import select

from cpsched.cli.local_service import LocalService, free_port, write_config
from cpsched.service.store.database import make_engine
from cpsched.service.store.models import FinishedJobRow

TOKEN = "crash-token"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


def batch_of(first: int, size: int) -> dict[str, object]:
    return {
        "jobs": [
            {
                "id": f"j{first + i}", "user": f"u{i % 7}", "submit": 0, "start": 1,
                "end": 2 + i, "time_limit": 3600, "units": 1, "per_unit": {"cpu": 1},
            }
            for i in range(size)
        ]
    }  # fmt: skip


def run(backend: str, url: str, work: Path, kills: int, size: int) -> dict[str, int]:
    work.mkdir(parents=True, exist_ok=True)
    config = write_config(work / "cpsched.toml", url, TOKEN, {"dispatcher": "easy"})
    service = LocalService(config, free_port(), work / "service.log")
    service.start()
    acknowledged: set[str] = set()
    sent: set[str] = set()
    attempts = retries = 0
    stop = threading.Event()

    def killer() -> None:
        rng = random.Random(7)
        for _ in range(kills):
            time.sleep(rng.uniform(0.3, 1.5))
            service.kill()
            service.start()
        stop.set()

    thread = threading.Thread(target=killer)
    thread.start()
    next_id = 0
    with httpx.Client(base_url=service.url, timeout=10) as client:
        while not stop.is_set():
            body = batch_of(next_id, size)
            ids = {job["id"] for job in body["jobs"]}  # type: ignore[index]
            sent |= ids
            while True:  # until acknowledged, as a bridge does
                attempts += 1
                try:
                    response = client.post(
                        f"/v1/clusters/{backend}/jobs/finished", json=body, headers=HEADERS
                    )
                    if response.status_code == 200:
                        acknowledged |= ids
                        break
                except httpx.HTTPError:
                    pass
                retries += 1
                time.sleep(0.05)
            next_id += size
    thread.join()
    service.stop()
    with make_engine(url).connect() as conn:
        stored = Counter(conn.scalars(select(FinishedJobRow.job_id)))
    return {
        "kills": kills,
        "batches": next_id // size,
        "posts": attempts,
        "retried_posts": retries,
        "acknowledged": len(acknowledged),
        "stored": sum(stored.values()),
        "acknowledged_missing": len(acknowledged - stored.keys()),
        "stored_twice": sum(1 for n in stored.values() if n > 1),
        "stored_never_sent": len(stored.keys() - sent),
        "stored_not_acknowledged": len(stored.keys() - acknowledged),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--batch", type=int, default=200)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cpsched-crash-"))
    name = f"cpsched_crash_{uuid.uuid4().hex[:8]}"
    admin = "postgresql://postgres@127.0.0.1:5432/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        urls = {
            "sqlite": f"sqlite:///{work / 'crash.db'}",
            "postgres": f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}",
        }
        results = {
            backend: run(backend, url, work / backend, args.kills, args.batch)
            for backend, url in urls.items()
        }
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    keys = list(next(iter(results.values())))
    print(f"{'':<24}" + "".join(f"{b:>12}" for b in results))
    for key in keys:
        print(f"{key:<24}" + "".join(f"{r[key]:>12,}" for r in results.values()))
    ok = all(
        r["acknowledged_missing"] == 0 and r["stored_twice"] == 0 and r["stored_never_sent"] == 0
        for r in results.values()
    )
    print("every acknowledged job stored exactly once:", "yes" if ok else "NO")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
