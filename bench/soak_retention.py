"""Soak: a steady bridge against a real ``cpsched serve`` for an hour, with retention on.

A simulated cluster (``--nodes`` nodes of 32 cpus) posts a snapshot every
``--gap`` seconds of real time, its own clock advancing ``--step`` seconds per call
(an hour of real time is days of the cluster's), starts what the service decides, and
posts its finished jobs. History is kept ``--keep-days`` days of the cluster's clock
(every kind), pruned every ``--interval`` seconds. Every ``--window`` seconds it prints:
the cluster's clock (days since the start), the rows stored per kind, the database's
size (the metric, and the SQLite file with its WAL), the service's RSS and the dispatch
round trip p50/p99, and the workload's size (jobs running and queued). The workload keeps
one size: the queue is topped up to ``--queue`` jobs each call and the machine stays
full, so once the retention window has passed, flat rows, size and RSS, and a stable p99,
are what the soak shows.

    .venv/bin/python bench/soak_retention.py [--minutes 60] [--keep-days 1]
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from service_common import HEADERS, TOKEN, percentile

from cpsched.cli.local_service import LocalService, free_port

T0 = 1_700_000_000
CPUS = 32


def write_config(
    path: Path, database: Path, keep_days: float, interval_s: float, mmap_threshold_kib: int
) -> None:
    path.write_text(
        "\n".join(
            [
                f'database_url = "sqlite:///{database}"',
                "upgrade_on_start = true",
                f"malloc_mmap_threshold_kib = {mmap_threshold_kib}",
                "[[tokens]]",
                'name = "bridge"',
                f'secret = "{TOKEN}"',
                "[retention]",
                f"audit_days = {keep_days}",
                f"predictions_days = {keep_days}",
                f"finished_days = {keep_days}",
                f"interval_s = {interval_s}",
            ]
        )
        + "\n"
    )


class Cluster:
    """Jobs arrive, start where the service says, and end after their run time."""

    def __init__(self, nodes: int, seed: int = 1) -> None:
        self.rng = random.Random(seed)
        self.nodes = [f"n{i:04d}" for i in range(nodes)]
        self.time = T0
        self.queued: dict[str, dict[str, Any]] = {}
        self.running: dict[str, dict[str, Any]] = {}
        self.next_id = 0

    def arrive(self, count: int) -> None:
        for _ in range(count):
            self.next_id += 1
            limit = self.rng.choice([600, 3600, 4 * 3600, 12 * 3600])
            self.queued[str(self.next_id)] = {
                "id": str(self.next_id),
                "user": f"u{self.rng.randrange(60)}",
                "submit": self.time,
                "time_limit": limit,
                "units": self.rng.choice([1, 1, 4, 16, 32, 64]),
                "per_unit": {"cpu": 1},
                "run": max(30, int(limit * self.rng.uniform(0.05, 0.9))),
            }

    def snapshot(self) -> dict[str, Any]:
        wire = lambda job: {k: v for k, v in job.items() if k != "run"}  # noqa: E731
        return {
            "time": self.time,
            "nodes": [{"name": n, "resources": {"cpu": CPUS}} for n in self.nodes],
            "running": [wire(job) for job in self.running.values()],
            "queued": [wire(job) for job in self.queued.values()],
        }

    def apply(self, answer: dict[str, Any]) -> None:
        for start in answer["starts"]:
            job = self.queued.pop(start["job_id"])
            self.running[job["id"]] = {**job, "start": self.time, "allocation": start["allocation"]}

    def advance(self, step: int) -> list[dict[str, Any]]:
        self.time += step
        ended = [j for j in self.running.values() if j["start"] + j["run"] <= self.time]
        for job in ended:
            del self.running[job["id"]]
        return [
            {
                **{k: v for k, v in job.items() if k not in {"run", "allocation"}},
                "end": job["start"] + job["run"],
                "state": "completed",
            }
            for job in ended
        ]


def cycle(http: httpx.Client, cluster: Cluster, step: int, queue: int) -> float:
    """One bridge cycle: dispatch, start what was decided, advance the cluster ``step``
    seconds, post what finished, top the queue up towards ``queue`` jobs. Returns the
    dispatch's round trip, ms (``http`` carries the token)."""
    sent = time.perf_counter()
    answer = http.post("/v1/clusters/soak/dispatch", json=cluster.snapshot())
    took = (time.perf_counter() - sent) * 1000
    answer.raise_for_status()
    cluster.apply(answer.json())
    done = cluster.advance(step)
    for chunk in range(0, len(done), 1000):
        http.post(
            "/v1/clusters/soak/jobs/finished", json={"jobs": done[chunk : chunk + 1000]}
        ).raise_for_status()
    missing = max(0, queue - len(cluster.queued))
    cluster.arrive(missing // 4 + cluster.rng.randrange(4))
    return took


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rows(database: Path) -> dict[str, int]:
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30) as db:
        return {
            table: db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            for table in ("decisions", "predictions", "finished_jobs")
        }


def metric(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--gap", type=float, default=0.5, help="real seconds between calls")
    parser.add_argument("--step", type=int, default=120, help="cluster seconds per call")
    parser.add_argument("--keep-days", type=float, default=1.0)
    parser.add_argument("--interval", type=float, default=60.0)
    parser.add_argument("--window", type=float, default=300.0)
    parser.add_argument("--queue", type=int, default=300, help="queued jobs kept waiting")
    parser.add_argument(
        "--mmap-threshold-kib",
        type=int,
        default=128,
        help="the service's malloc_mmap_threshold_kib (0: glibc's moving default)",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cpsched-soak-"))
    database = work / "cpsched.db"
    config = work / "cpsched.toml"
    write_config(config, database, args.keep_days, args.interval, args.mmap_threshold_kib)
    service = LocalService(config, free_port(), work / "service.log")
    service.start()
    assert service.process is not None
    cluster = Cluster(args.nodes)
    cluster.arrive(args.queue)
    print(
        f"soak: {args.nodes} nodes, a call every {args.gap:g} s advancing the cluster "
        f"{args.step} s, history kept {args.keep_days:g} days, pruned every {args.interval:g} s, "
        f"mmap threshold {args.mmap_threshold_kib} KiB"
    )
    print(
        "minute  cluster day  decisions  predictions  finished  db (metric) MB  file+wal MB"
        "  RSS MB  p50 ms  p99 ms  running  queued"
    )
    latencies: list[float] = []
    began = window_began = time.monotonic()
    try:
        with httpx.Client(base_url=service.url, headers=HEADERS, timeout=30) as http:
            while time.monotonic() - began < args.minutes * 60:
                latencies.append(cycle(http, cluster, args.step, args.queue))
                if time.monotonic() - window_began >= args.window:
                    window_began = time.monotonic()
                    metrics = http.get("/metrics").text
                    stored = rows(database)
                    on_disk = sum(p.stat().st_size for p in work.glob("cpsched.db*") if p.is_file())
                    in_use = metric(metrics, "cpsched_database_bytes")
                    print(
                        f"{(time.monotonic() - began) / 60:6.1f}  "
                        f"{(cluster.time - T0) / 86_400:11.2f}  {stored['decisions']:9d}  "
                        f"{stored['predictions']:11d}  {stored['finished_jobs']:8d}  "
                        f"{(in_use or 0) / 2**20:14.1f}  {on_disk / 2**20:11.1f}  "
                        f"{rss_mb(service.process.pid):6.0f}  "
                        f"{percentile(latencies, 0.5):6.1f}  {percentile(latencies, 0.99):6.1f}  "
                        f"{len(cluster.running):7d}  {len(cluster.queued):6d}",
                        flush=True,
                    )
                    latencies = []
                time.sleep(args.gap)
    finally:
        service.stop()


if __name__ == "__main__":
    main()
