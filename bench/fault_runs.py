"""Fault runs against a real ``cpsched serve``: what a sysadmin's routine and mishaps do.

* ``lock``: six clusters' bridges post (a dispatch every 0.2 s each, finished jobs every
  second) while ``LOCK TABLE decisions IN ACCESS EXCLUSIVE MODE`` is held for
  ``--lock-s`` seconds (what ``VACUUM FULL`` or an ``ALTER TABLE`` takes), on PostgreSQL
  (127.0.0.1:5432, a database of its own). Every answer should come by the deadline +
  150 ms or be a 503; ``/healthz`` should answer within 50 ms throughout.
* ``two-bridges``: two bridges (two writer names) dispatch for one cluster: the second
  should be refused (423) and counted, and take over once the first stops.
* ``disk-full`` (root): the SQLite database on a 24 MB tmpfs filled up by another file
  while a bridge posts: writes fail with 503 and ``/readyz`` says so, then the space is
  freed and both recover.

Each run checks that no acknowledged finished job is missing from the database.

    .venv/bin/python bench/fault_runs.py [--runs lock,two-bridges,disk-full] [--lock-s 120]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg
from service_common import HEADERS, TOKEN, percentile, postgres_database

from cpsched.cli.local_service import LocalService, free_port, write_config

DEADLINE = 0.2
T0 = 1_700_000_000


def snapshot(at: int, tag: str) -> dict[str, Any]:
    return {
        "time": at,
        "nodes": [{"name": f"n{i}", "resources": {"cpu": 8}} for i in range(16)],
        "queued": [
            {"id": f"{tag}-q{at}-{k}", "user": f"u{k % 5}", "submit": at, "time_limit": 600,
             "units": 1 + k % 4, "per_unit": {"cpu": 1}}
            for k in range(20)
        ],
    }  # fmt: skip


def finished(tag: str, k: int, at: int) -> dict[str, Any]:
    return {
        "id": f"{tag}-f{k}", "user": f"u{k % 5}", "submit": at - 100, "time_limit": 600,
        "units": 1, "per_unit": {"cpu": 1}, "start": at - 60, "end": at, "state": "completed",
    }  # fmt: skip


class Prober(threading.Thread):
    """GETs ``path`` every 20 ms; keeps (latency, status) of each."""

    def __init__(self, url: str, path: str) -> None:
        super().__init__(daemon=True)
        self.url, self.path = url, path
        self.seen: list[tuple[float, int]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as http:
            while not self.stop.wait(0.02):
                began = time.perf_counter()
                try:
                    status = http.get(self.path).status_code
                except httpx.HTTPError:
                    status = 0
                self.seen.append((time.perf_counter() - began, status))


class Bridge(threading.Thread):
    """One cluster's bridge: a dispatch every 0.2 s, finished jobs every second."""

    def __init__(self, url: str, cluster: str, writer: str, until: float) -> None:
        super().__init__(daemon=True)
        self.url, self.cluster, self.writer, self.until = url, cluster, writer, until
        self.answers: list[tuple[float, int]] = []  # (latency, status) of each dispatch
        self.acked: set[str] = set()
        self.next_job = 0

    def run(self) -> None:
        headers = {**HEADERS, "X-Cpsched-Writer": self.writer}
        with httpx.Client(base_url=self.url, headers=headers, timeout=30) as http:
            at, last_finished = T0, 0.0
            while time.monotonic() < self.until:
                at += 10
                began = time.perf_counter()
                try:
                    status = http.post(
                        f"/v1/clusters/{self.cluster}/dispatch", json=snapshot(at, self.cluster)
                    ).status_code
                except httpx.HTTPError:
                    status = 0
                self.answers.append((time.perf_counter() - began, status))
                if time.monotonic() - last_finished >= 1:
                    last_finished = time.monotonic()
                    self._post_finished(http, at)
                time.sleep(0.2)

    def _post_finished(self, http: httpx.Client, at: int) -> None:
        jobs = [finished(self.cluster, self.next_job + k, at) for k in range(20)]
        try:
            answer = http.post(f"/v1/clusters/{self.cluster}/jobs/finished", json={"jobs": jobs})
        except httpx.HTTPError:
            return
        if answer.status_code == 200:
            self.acked.update(j["id"] for j in jobs)
            self.next_job += 20


def start_service(work: Path, url: str, **extra: object) -> LocalService:
    config = write_config(work / "cpsched.toml", url, TOKEN, {"deadline": DEADLINE})
    config.write_text("".join(f"{k} = {v}\n" for k, v in extra.items()) + config.read_text())
    service = LocalService(config, free_port(), work / "service.log")
    service.start()
    return service


def stored_ids(url: str) -> set[str]:
    if url.startswith("sqlite"):
        import sqlite3
        from contextlib import closing

        with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as db:
            return {row[0] for row in db.execute("SELECT job_id FROM finished_jobs")}
    plain = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain) as db:
        return {row[0] for row in db.execute("SELECT job_id FROM finished_jobs")}


def lost(bridges: list[Bridge], url: str) -> int:
    acked = set().union(*(b.acked for b in bridges))
    return len(acked - stored_ids(url))


def run_lock(lock_s: float) -> None:
    work = Path(tempfile.mkdtemp(prefix="cpsched-fault-lock-"))
    with postgres_database("cpsched_fault") as url:
        service = start_service(work, url)
        try:
            health = Prober(service.url, "/healthz")
            health.start()
            until = time.monotonic() + 10 + lock_s + 10
            bridges = [Bridge(service.url, f"c{i}", f"host{i}", until) for i in range(6)]
            for bridge in bridges:
                bridge.start()
            time.sleep(10)
            plain = url.replace("postgresql+psycopg://", "postgresql://")
            began = time.perf_counter()
            with psycopg.connect(plain) as maintenance:
                maintenance.execute("LOCK TABLE decisions IN ACCESS EXCLUSIVE MODE")
                time.sleep(lock_s)
            held = time.perf_counter() - began
            for bridge in bridges:
                bridge.join()
            health.stop.set()
            health.join()
        finally:
            service.stop()
        answers = [a for b in bridges for a in b.answers]
        late = sum(1 for s, status in answers if status != 503 and s > DEADLINE + 0.15)
        refused = sum(1 for _, status in answers if status == 503)
        other = sum(1 for _, status in answers if status not in {200, 503})
        trips = [s for s, _ in health.seen]
        print(
            f"lock: table locked {held:.0f} s, six clusters: {len(answers)} dispatches, "
            f"{refused} answered 503, {late} other answers over deadline + 150 ms, "
            f"{other} neither 200 nor 503; /healthz {len(trips)} probes, p99 "
            f"{percentile(trips, 0.99) * 1000:.0f} ms, max {max(trips) * 1000:.0f} ms, "
            f"{sum(1 for _, st in health.seen if st != 200)} not 200; acknowledged finished "
            f"jobs lost: {lost(bridges, url)} of {sum(len(b.acked) for b in bridges)}"
        )


def run_two_bridges() -> None:
    work = Path(tempfile.mkdtemp(prefix="cpsched-fault-two-"))
    url = f"sqlite:///{work / 'cpsched.db'}"
    service = start_service(work, url, writer_lease_s=5)
    try:
        first = Bridge(service.url, "c1", "head1:aaaa", time.monotonic() + 10)
        first.start()
        time.sleep(1)
        second = Bridge(service.url, "c1", "head2:bbbb", time.monotonic() + 20)
        second.start()
        first.join()
        second.join()
        metrics = httpx.get(f"{service.url}/metrics").text
    finally:
        service.stop()
    refused = sum(1 for _, status in second.answers if status == 423)
    taken_over = next(
        (k for k, (_, status) in enumerate(second.answers) if status == 200 and k > refused - 1),
        None,
    )
    counted = next(
        (line for line in metrics.splitlines() if line.startswith("cpsched_writer_conflicts")),
        "",
    )
    print(
        f"two bridges: the first's {len(first.answers)} dispatches "
        f"{sum(1 for _, st in first.answers if st == 200)} answered; the second's "
        f"{len(second.answers)}: {refused} refused (423) while the first ran, then answered "
        f"from its dispatch {taken_over} on (the lease: 5 s after the first stopped); "
        f"metric: {counted or 'missing'}; acknowledged finished jobs lost: "
        f"{lost([first, second], url)}"
    )


def run_disk_full() -> None:
    if os.geteuid() != 0:
        print("disk full: skipped (needs root for a tmpfs)")
        return
    mount = Path(tempfile.mkdtemp(prefix="cpsched-fault-disk-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)], check=True)
    try:
        url = f"sqlite:///{mount / 'cpsched.db'}"
        service = start_service(mount, url)
        filler = mount / "filler"
        try:
            bridge = Bridge(service.url, "c1", "head1", time.monotonic() + 40)
            ready = Prober(service.url, "/readyz")
            ready.start()
            bridge.start()
            time.sleep(5)
            with filler.open("wb") as fill:  # the disk fills up
                try:
                    while True:
                        fill.write(b"\0" * 1_000_000)
                        fill.flush()
                except OSError:
                    pass
            full_at = len(bridge.answers), len(ready.seen)
            time.sleep(15)
            filler.unlink()  # space freed
            freed_at = len(bridge.answers), len(ready.seen)
            bridge.join()
            ready.stop.set()
            ready.join()
        finally:
            service.stop()
        during = bridge.answers[full_at[0] : freed_at[0]]
        after = bridge.answers[freed_at[0] + 10 :]
        ready_during = ready.seen[full_at[1] + 25 : freed_at[1]]
        ready_after = ready.seen[freed_at[1] + 100 :]
        print(
            f"disk full: while full {sum(1 for _, st in during if st == 503)} of {len(during)} "
            f"dispatches 503, /readyz not 200 on "
            f"{sum(1 for _, st in ready_during if st != 200)} of {len(ready_during)} probes "
            f"(after the first 0.5 s); after freeing: "
            f"{sum(1 for _, st in after if st == 200)} of {len(after)} dispatches 200, "
            f"/readyz 200 on {sum(1 for _, st in ready_after if st == 200)} of "
            f"{len(ready_after)}; acknowledged finished jobs lost: {lost([bridge], url)} of "
            f"{len(bridge.acked)}"
        )
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="lock,two-bridges,disk-full")
    parser.add_argument("--lock-s", type=float, default=120)
    args = parser.parse_args()
    for run in args.runs.split(","):
        if run == "lock":
            run_lock(args.lock_s)
        elif run == "two-bridges":
            run_two_bridges()
        elif run == "disk-full":
            run_disk_full()
        else:
            raise SystemExit(f"unknown run {run!r}: lock, two-bridges, disk-full")


if __name__ == "__main__":
    main()
