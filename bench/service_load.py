"""Service load, from a second process: dispatch-endpoint overhead and ingestion rate.

* Dispatch overhead: a snapshot of 1,000 nodes, 500 running and 100 queued jobs is
  posted again and again (the queue changes every call so every job is new to the
  predictor half the time); overhead = client round trip − the dispatcher's own decide
  time (``diagnostics.solve_ms``): parsing, predictions, translation, audit commit, JSON.
* Ingestion: batches of finished jobs posted back to back for a fixed time; jobs/s.
* Contention: the longest dispatch round trip while three 10,000-job finished batches
  are posted (before issue 20 a dispatch waited for a whole batch: up to 1.8 s on
  SQLite, 3.7 s on PostgreSQL).

Both run against SQLite and PostgreSQL (127.0.0.1:5432, user postgres) side by side:

    .venv/bin/python bench/service_load.py [--calls 200] [--seconds 10] [--batch 500]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

import httpx
from service_common import HEADERS, TOKEN, percentile, postgres_database

from cpsched.cli.local_service import local_service


def big_snapshot(call: int) -> dict[str, object]:
    nodes = [
        {
            "name": f"n{i:04d}",
            "resources": {"cpu": 32, "mem": 128_000, **({"gpu": 4} if i % 4 == 0 else {})},
        }
        for i in range(1000)
    ]
    running = [
        {
            "id": f"r{j}", "user": f"u{j % 50}", "submit": 0, "start": 100 + j,
            "time_limit": 86_400, "units": 32, "per_unit": {"cpu": 1, "mem": 2000},
            "allocation": {f"n{2 * j:04d}": 16, f"n{2 * j + 1:04d}": 16},
        }
        for j in range(500)
    ]  # fmt: skip
    # Every node is full: the queue cannot start, so the solve is short and the figure
    # is the service's own overhead. Half the queue is new at every call.
    queued = [
        {
            "id": f"q{call}-{k}" if k % 2 else f"q-{k}", "user": f"u{k % 50}",
            "submit": 1000 + k, "time_limit": 3600, "units": 64, "per_unit": {"cpu": 1},
        }
        for k in range(100)
    ]  # fmt: skip
    return {"time": 10_000 + call, "nodes": nodes, "running": running, "queued": queued}


def bench_dispatch(client: httpx.Client, calls: int) -> dict[str, float]:
    import json

    bodies = [json.dumps(big_snapshot(c)) for c in range(calls + 5)]
    overhead, total = [], []
    for c, body in enumerate(bodies):
        began = time.perf_counter()
        response = client.post("/v1/clusters/load/dispatch", content=body, headers=HEADERS)
        elapsed = (time.perf_counter() - began) * 1000
        response.raise_for_status()
        if c < 5:
            continue  # warm-up
        solve = response.json()["diagnostics"]["solve_ms"]
        total.append(elapsed)
        overhead.append(elapsed - solve)
    return {
        "bytes": len(bodies[0]),
        "overhead_p50_ms": percentile(overhead, 0.5),
        "overhead_p99_ms": percentile(overhead, 0.99),
        "total_p50_ms": percentile(total, 0.5),
        "total_p99_ms": percentile(total, 0.99),
    }


def bench_ingest(client: httpx.Client, seconds: float, batch: int) -> dict[str, float]:
    sent = 0
    began = time.perf_counter()
    while time.perf_counter() - began < seconds:
        jobs = [
            {
                "id": f"f{sent + i}", "user": f"u{i % 50}", "submit": 0, "start": 10,
                "end": 10 + i % 3600, "time_limit": 3600, "units": 1, "per_unit": {"cpu": 1},
            }
            for i in range(batch)
        ]  # fmt: skip
        response = client.post(
            "/v1/clusters/load/jobs/finished", json={"jobs": jobs}, headers=HEADERS
        )
        response.raise_for_status()
        assert response.json()["stored"] == batch
        sent += batch
    elapsed = time.perf_counter() - began
    return {"jobs": sent, "jobs_per_s": sent / elapsed}


def bench_contention(client: httpx.Client, url: str, batch: int = 10_000) -> dict[str, float]:
    """Dispatch round trips (another connection) while three ``batch``-job batches go in."""
    import json

    body = json.dumps(big_snapshot(0))
    trips: list[float] = []
    stop = threading.Event()

    def dispatching() -> None:
        with httpx.Client(base_url=url, timeout=120) as other:
            while not stop.is_set():
                began = time.perf_counter()
                other.post("/v1/clusters/busy/dispatch", content=body, headers=HEADERS)
                trips.append(time.perf_counter() - began)

    thread = threading.Thread(target=dispatching)
    thread.start()
    time.sleep(1)
    began = time.perf_counter()
    for b in range(3):
        jobs = [
            {
                "id": f"c{b}-{i}", "user": f"u{i % 50}", "submit": 0, "start": 10,
                "end": 10 + i % 3600, "time_limit": 3600, "units": 1, "per_unit": {"cpu": 1},
            }
            for i in range(batch)
        ]  # fmt: skip
        client.post("/v1/clusters/busy/jobs/finished", json={"jobs": jobs}, headers=HEADERS)
    batches = time.perf_counter() - began
    stop.set()
    thread.join()
    return {"max_ms": max(trips) * 1000, "p50_ms": percentile(trips, 0.5) * 1000, "s": batches}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args()
    rows = []
    work = Path(tempfile.mkdtemp(prefix="cpsched-load-"))
    with postgres_database() as pg:
        for backend, url in [("sqlite", None), ("postgres", pg)]:
            with (
                local_service(work / backend, database_url=url, token=TOKEN) as service,
                httpx.Client(base_url=service.url, timeout=60) as client,
            ):
                dispatch = bench_dispatch(client, args.calls)
                ingest = bench_ingest(client, args.seconds, args.batch)
                ingest.update(bench_contention(client, service.url))
            rows.append((backend, dispatch, ingest))
    print(f"snapshot: 1000 nodes, 500 running, 100 queued ({rows[0][1]['bytes']:,} bytes JSON)")
    header = ("backend", "overhead p50", "p99", "round trip p50", "p99", "ingest jobs/s")
    print("{:<9} {:>13} {:>8} {:>15} {:>8} {:>14}".format(*header))
    for backend, d, i in rows:
        print(
            f"{backend:<9} {d['overhead_p50_ms']:>10.1f} ms {d['overhead_p99_ms']:>5.1f} ms "
            f"{d['total_p50_ms']:>12.1f} ms {d['total_p99_ms']:>5.1f} ms {i['jobs_per_s']:>14,.0f}"
        )
    (_, sd, si), (_, pd, pi) = rows
    print(
        f"postgres / sqlite: overhead p50 x{pd['overhead_p50_ms'] / sd['overhead_p50_ms']:.2f}, "
        f"ingestion x{pi['jobs_per_s'] / si['jobs_per_s']:.2f}"
    )
    for backend, _, i in rows:
        print(
            f"{backend}: while 3 x 10,000 finished jobs went in ({i['s']:.1f} s), dispatch "
            f"round trip p50 {i['p50_ms']:.0f} ms, max {i['max_ms']:.0f} ms"
        )


if __name__ == "__main__":
    main()
