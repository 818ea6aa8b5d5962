"""Dispatch at scale, from a second process: round trip p50/p99 and the service's peak
memory for big snapshots, EASY against the default policy's HCP3.

Each size is a machine of N nodes (64 cores, 256,000 MiB; every eighth with 4 GPUs),
running jobs filling about 90% of the cores, and Q queued jobs (1 to 512 cores, 2,000 MiB
a core, limits of 10 min to a day). Every call moves the clock 10 s and replaces 1% of the
queue with new jobs, as a bridge's consecutive snapshots do. Each (size, dispatcher) gets
a fresh service (SQLite unless --postgres), a warm-up call (every job new: not counted),
then --calls calls. "late" counts answers over deadline + 150 ms; "fallback" answers the
fallback gave (the service's, or the CP dispatcher's own); "healthz" the longest /healthz
round trip while the counted calls ran (a second client asks every 20 ms): what a large
request costs the requests beside it. ``--idle``: no running job and every queued job
startable (1 to 64 cores: an empty machine after a maintenance window, where each call
can start the whole queue); "starts" is the mean per call and "partial" the answers of
a heuristic stopped at the deadline.

    .venv/bin/python bench/service_scale.py [--calls 20] [--deadline 2]
        [--sizes 1000x1000,1000x10000,1000x50000,5000x1000,5000x10000,5000x50000]
        [--dispatchers easy,hcp3] [--postgres] [--idle] [--delta] [--types 8]
        [--wait-bound S [--wait-bound-depth N]]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import random
import tempfile
import threading
import time
from contextlib import nullcontext
from pathlib import Path

import httpx
from service_common import HEADERS, TOKEN, peak_rss_mb, percentile, postgres_database

from cpsched.cli.local_service import local_service
from cpsched.wire.deltas import HeldSnapshot, delta_between
from cpsched.wire.schemas import DispatchRequest

CORES, MEM = 64, 256_000
NOW = 1_000_000


def machine(nodes: int, types: int | None = None) -> list[dict[str, object]]:
    """``types`` None: cpu, mem and 4 GPUs on every eighth node; else cpu, mem and
    ``types - 2`` more types (4 of each on every node)."""

    def extra(i: int) -> dict[str, int]:
        if types is None:
            return {"gpu": 4} if i % 8 == 0 else {}
        return {f"t{k}": 4 for k in range(2, types)}

    return [
        {"name": f"n{i:05d}", "resources": {"cpu": CORES, "mem": MEM, **extra(i)}}
        for i in range(nodes)
    ]


def running_jobs(nodes: int, rng: random.Random) -> list[dict[str, object]]:
    """Jobs filling about 90% of the cores, node after node."""
    free = [CORES] * nodes
    jobs: list[dict[str, object]] = []
    node = 0
    while sum(CORES - f for f in free) < 0.9 * CORES * nodes:
        size = rng.choice([1, 4, 16, 32, 64, 128, 256])
        allocation: dict[str, int] = {}
        left = size
        while left and node < nodes:
            take = min(left, free[node])
            if take:
                allocation[f"n{node:05d}"] = take
                free[node] -= take
                left -= take
            if not free[node]:
                node += 1
        if left:
            break
        jobs.append(
            {
                "id": f"r{len(jobs)}", "user": f"u{rng.randrange(200)}", "submit": NOW - 90_000,
                "start": NOW - rng.randrange(1, 80_000), "time_limit": 2 * 86_400,
                "units": size, "per_unit": {"cpu": 1, "mem": 2000}, "allocation": allocation,
            }
        )  # fmt: skip
    return jobs


def queued_job(k: int, rng: random.Random) -> dict[str, object]:
    return {
        "id": f"q{k}", "user": f"u{rng.randrange(200)}", "submit": NOW - 80_000 + k,
        "time_limit": rng.choice([600, 3600, 4 * 3600, 86_400]),
        "units": rng.choice([1, 1, 2, 4, 8, 16, 32, 64, 128, 512]),
        "per_unit": {"cpu": 1, "mem": 2000},
    }  # fmt: skip


def startable_job(k: int, rng: random.Random, types: int | None = None) -> dict[str, object]:
    """A job that fits one node; with ``types``, one in eight also asks for one unit of
    an extra type per unit."""
    job = {**queued_job(k, rng), "units": rng.choice([1, 2, 4, 8, 16, 32, 64])}
    if types is not None and types > 2 and rng.randrange(8) == 0:
        job["units"] = rng.choice([1, 2, 4])
        job["per_unit"] = {**job["per_unit"], f"t{rng.randrange(2, types)}": 1}  # type: ignore[dict-item]
    return job


def snapshots(
    nodes: int,
    queued: int,
    calls: int,
    seed: int = 1,
    *,
    idle: bool = False,
    types: int | None = None,
) -> list[bytes]:
    """The warm-up snapshot and ``calls`` more, each 10 s later with 1% of its queue new
    (``idle``: on an empty machine, every job startable; as each call is posted without
    applying the one before, each finds the machine empty again; ``types``: see
    :func:`machine`)."""
    rng = random.Random(seed)
    base = {"nodes": machine(nodes, types), "running": [] if idle else running_jobs(nodes, rng)}

    def new_job(k: int, rng: random.Random) -> dict[str, object]:
        return startable_job(k, rng, types) if idle else queued_job(k, rng)

    queue = [new_job(k, rng) for k in range(queued)]
    bodies = []
    fresh = queued
    for call in range(calls + 1):
        bodies.append(json.dumps({"time": NOW + 10 * call, **base, "queued": queue}).encode())
        for _ in range(max(1, queued // 100)):
            queue[rng.randrange(queued)] = new_job(fresh, rng)
            fresh += 1
    return bodies


PLACEHOLDER = b"0" * 64
"""The base of a prepared delta until the previous answer names its snapshot."""


def as_deltas(bodies: list[bytes]) -> list[bytes]:
    """The warm-up snapshot whole, then each next one as a delta against the one before
    (``--delta``: what :class:`~cpsched.wire.client.ServiceClient` sends), its base left
    to fill in from the previous answer."""
    requests = [DispatchRequest.model_validate_json(body) for body in bodies]
    deltas = [bodies[0]]
    for before, after in itertools.pairwise(requests):
        held = HeldSnapshot.of(before, PLACEHOLDER.decode())
        delta = delta_between(held, after)
        assert delta is not None  # no job is listed twice
        deltas.append(delta.model_dump_json().encode())
    return deltas


class HealthProbe:
    """GETs /healthz every 20 ms in a thread, noting the round trips while ``counting``."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.counting = False
        self.trips: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._probe, daemon=True)

    def _probe(self) -> None:
        with httpx.Client(base_url=self.url, timeout=60) as client:
            while not self._stop.wait(0.02):
                began = time.perf_counter()
                client.get("/healthz")
                if self.counting:
                    self.trips.append(time.perf_counter() - began)

    def __enter__(self) -> HealthProbe:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def run(
    nodes: int, queued: int, dispatcher: str, args: argparse.Namespace, url: str | None
) -> dict[str, float]:
    bodies = snapshots(nodes, queued, args.calls, idle=args.idle, types=args.types)
    if args.delta:
        bodies = as_deltas(bodies)
    # The bodies and parsed snapshots live through the row: out of this process's full
    # collections, which would otherwise stall the /healthz probe's thread here (up to
    # 0.5 s seen at 50,000 nodes) and be counted as the service's.
    gc.collect()
    gc.freeze()
    work = Path(tempfile.mkdtemp(prefix="cpsched-scale-"))
    defaults: dict[str, object] = {"dispatcher": dispatcher, "deadline": args.deadline}
    if args.wait_bound is not None:
        defaults["wait_bound"] = args.wait_bound
        defaults["wait_bound_depth"] = args.wait_bound_depth
    with (
        local_service(work, database_url=url, token=TOKEN, **defaults) as service,
        httpx.Client(base_url=service.url, timeout=600) as client,
        HealthProbe(service.url) as probe,
    ):
        trips, late, fallbacks, partial, starts = [], 0, 0, 0, 0
        digest = b""
        for call, body in enumerate(bodies):
            probe.counting = call > 0
            path = "/v1/clusters/scale/dispatch"
            if args.delta and call > 0:
                path, body = f"{path}/delta", body.replace(PLACEHOLDER, digest, 1)
            began = time.perf_counter()
            response = client.post(path, content=body, headers=HEADERS)
            elapsed = time.perf_counter() - began
            if response.status_code != 200:
                raise SystemExit(f"{response.status_code}: {response.text[:500]}")
            if call == 0:
                digest = response.json()["snapshot_digest"].encode()
                continue  # warm-up: every job is new
            trips.append(elapsed)
            digest = response.json()["snapshot_digest"].encode()
            late += elapsed > args.deadline + 0.15
            answer = response.json()
            fallbacks += answer["diagnostics"]["fallback"]
            partial += answer["diagnostics"].get("partial", False)
            starts += len(answer["starts"])
        assert service.process is not None
        peak = peak_rss_mb(service.process.pid)
    return {
        "bytes": len(bodies[0]),
        "p50": percentile(trips, 0.5),
        "p99": percentile(trips, 0.99),
        "max": max(trips),
        "late": late,
        "fallbacks": fallbacks,
        "partial": partial,
        "starts": starts / max(1, len(trips)),
        "calls": len(trips),
        "peak_mb": peak,
        "healthz_ms": max(probe.trips, default=float("nan")) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--deadline", type=float, default=2.0)
    parser.add_argument(
        "--sizes", default="1000x1000,1000x10000,1000x50000,5000x1000,5000x10000,5000x50000"
    )
    parser.add_argument("--dispatchers", default="easy,hcp3")
    parser.add_argument("--postgres", action="store_true", help="PostgreSQL, not SQLite.")
    parser.add_argument(
        "--delta", action="store_true", help="After the warm-up, post deltas (/dispatch/delta)."
    )
    parser.add_argument("--idle", action="store_true", help="An empty machine: all startable.")
    parser.add_argument(
        "--wait-bound",
        type=int,
        help="The policy's wait_bound in seconds (default: the default policy's, 6 h, one "
        "job at a time; 0: none). The queued jobs have waited up to 22 h, so guarantees are "
        "given and kept on every call.",
    )
    parser.add_argument(
        "--wait-bound-depth",
        type=int,
        default=1,
        help="With --wait-bound: the most jobs holding a guarantee at once (default 1, the "
        "bounded policy's; 0: no limit).",
    )
    parser.add_argument(
        "--types", type=int, help="Resource types per node (>= 2): cpu, mem and more."
    )
    args = parser.parse_args()
    print(
        f"deadline {args.deadline} s, {args.calls} calls per row after a warm-up; "
        f"{'PostgreSQL' if args.postgres else 'SQLite'}; late = over deadline + 150 ms"
        f"{f'; {args.types} resource types' if args.types else ''}"
        f"{'; deltas after the warm-up (body MB: the whole snapshot)' if args.delta else ''}"
    )
    header = ("nodes", "queued", "body MB", "dispatcher", "p50 s", "p99 s", "max s", "late")
    print("{:>6} {:>7} {:>8} {:>10} {:>7} {:>7} {:>7} {:>5} {:>9} {:>8} {:>7} {:>8} {:>10}".format(
        *header, "fallback", "partial", "starts", "peak MB", "healthz ms"))  # fmt: skip
    for size in args.sizes.split(","):
        nodes, queued = (int(x) for x in size.split("x"))
        for dispatcher in args.dispatchers.split(","):
            with postgres_database() if args.postgres else nullcontext() as url:
                r = run(nodes, queued, dispatcher, args, url)
            print(
                f"{nodes:>6} {queued:>7} {r['bytes'] / 1e6:>8.1f} {dispatcher:>10} "
                f"{r['p50']:>7.3f} {r['p99']:>7.3f} {r['max']:>7.3f} {r['late']:>5} "
                f"{r['fallbacks']:>4}/{r['calls']:<4} {r['partial']:>8} {r['starts']:>7.0f} "
                f"{r['peak_mb']:>8.0f} "
                f"{r['healthz_ms']:>10.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
