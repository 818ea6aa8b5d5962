"""What the dashboard tests feed a service: snapshots a bridge could send.

* ``burst``: 120 one-core jobs on 600 idle nodes. PCP3 refuses a model that large
  (more than 50,000 ``x[i,n]`` variables) and the fallback answers at once: with a
  deadline no busy machine misses (the tests give 5 s), the deterministic fallback the
  decision log must show, for "model too large".
* ``live``: 8 nodes of 4 cores, 6 running jobs (two sharing a node, one spread over two
  nodes) and 12 queued jobs, the last held back by a dependency: what the queue and the
  Gantt chart must show.
* ``big_queue``: what ``squeue`` shows on a busy site: 512 nodes of 16 cores, most of
  them busy, and 5,000 queued jobs of 40 users in three partitions and three QOS names,
  with Slurm's priorities; one in 50 held back by a dependency (the queue page at scale).
* ``shadow``: three dry runs and the finished jobs of a small cluster in shadow mode, on
  EASY (deterministic): cpsched would have started s2 earlier than the workload manager
  did, s1 and s3 at about the same time (0 s and 50 s apart), and s4 later (the workload
  manager started it while every dry run left it waiting).
"""

from __future__ import annotations

import random
from typing import Any

LIVE_RUNNING = ("k-r1", "k-r2", "k-r3", "k-r4", "k-r5", "k-r6")
LIVE_QUEUED = tuple(f"k-q{i:02d}" for i in range(1, 13))
SHADOW_VERDICTS = {"s1": "same", "s2": "earlier", "s3": "same", "s4": "later"}


def _job(job_id: str, submit: int, limit: int, units: int, user: str, **per_unit: int) -> dict:
    return {
        "id": job_id,
        "user": user,
        "submit": submit,
        "time_limit": limit,
        "units": units,
        "per_unit": per_unit or {"cpu": 1},
    }


def _running(job: dict, start: int, allocation: dict[str, int]) -> dict:
    return {**job, "start": start, "allocation": allocation}


def _nodes(prefix: str, count: int, cpu: int = 4, mem: int = 16000) -> list[dict[str, Any]]:
    return [
        {"name": f"{prefix}{i:02d}", "resources": {"cpu": cpu, "mem": mem}}
        for i in range(1, count + 1)
    ]


def burst(t: int) -> dict[str, Any]:
    nodes = [{"name": f"b{i:03d}", "resources": {"cpu": 4}} for i in range(600)]
    queued = [_job(f"burst{i}", t - 120 + i, 3600, 1, "dave") for i in range(120)]
    return {"time": t, "nodes": nodes, "running": [], "queued": queued}


def live(t: int) -> dict[str, Any]:
    users = ("alice", "bob", "carol")
    running = [
        _running(_job("k-r1", t - 3600, 7200, 4, "alice"), t - 3000, {"n01": 4}),
        _running(_job("k-r2", t - 1500, 3600, 8, "bob"), t - 1200, {"n02": 4, "n03": 4}),
        _running(_job("k-r3", t - 700, 1800, 2, "carol"), t - 600, {"n04": 2}),
        _running(_job("k-r4", t - 5200, 14400, 2, "alice"), t - 5000, {"n04": 2}),
        _running(_job("k-r5", t - 7100, 7200, 1, "bob"), t - 7000, {"n05": 1}),
        _running(_job("k-r6", t - 200, 3600, 3, "carol"), t - 100, {"n06": 3}),
    ]
    sizes = (8, 16, 4, 2, 12, 1, 6, 3, 10, 2, 5, 4)
    limits = (3600, 7200, 1800, 900, 14400, 600, 3600, 5400, 7200, 1200, 2700, 3600)
    queued = [
        _job(job_id, t - 1800 + 90 * i, limit, units, users[i % 3])
        for i, (job_id, units, limit) in enumerate(zip(LIVE_QUEUED, sizes, limits, strict=True))
    ]
    # The last one waits for another job to end: Slurm holds it back.
    queued[-1] |= {"eligible": False, "reason": "Dependency"}
    return {"time": t, "nodes": _nodes("n", 8), "running": running, "queued": queued}


BIG_QUEUED = 5000
BIG_NODES = 512


def big_queue(t: int, seed: int = 41) -> dict[str, Any]:
    rng = random.Random(seed)
    names = [f"c{i:03d}" for i in range(BIG_NODES)]
    nodes = [{"name": n, "resources": {"cpu": 16, "mem": 64000}} for n in names]
    partitions = [
        {"name": "batch", "nodes": names},
        {"name": "long", "nodes": names[:256]},
        {"name": "debug", "nodes": names[-32:]},
    ]
    running = []
    for i, name in enumerate(names[: BIG_NODES - 24]):  # 24 nodes idle
        job = _job(f"r{i:04d}", t - 7200, 86400, 16, f"user{i % 40:02d}", cpu=1, mem=4000)
        running.append(_running(job, t - rng.randrange(60, 40000), {name: 16}))
    queued = []
    for i in range(BIG_QUEUED):
        partition = rng.choice(("batch", "batch", "batch", "long", "debug"))
        units = rng.choice((1, 4, 16, 32, 64, 128, 256))
        job = _job(
            f"{900000 + i}",
            t - 600 * 3600 + rng.randrange(600 * 3600 - 60),
            rng.choice((900, 3600, 14400, 43200, 86400)),
            units,
            f"user{rng.randrange(40):02d}",
            cpu=1,
            mem=2000,
        )
        job |= {
            "partition": partition,
            "qos": rng.choice(("normal", "normal", "high", "low")),
            "priority": rng.randrange(1000, 100000),
        }
        if i % 50 == 49:
            job |= {"eligible": False, "reason": "Dependency"}
        queued.append(job)
    queued.sort(key=lambda j: j["submit"])
    return {
        "time": t,
        "nodes": nodes,
        "partitions": partitions,
        "running": running,
        "queued": queued,
    }


def shadow() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The dry runs (in order) and the finished jobs of the shadow cluster."""
    nodes = _nodes("s", 2)
    r1 = _job("r1", 8900, 7200, 4, "erin")
    s1, s2 = _job("s1", 9900, 600, 2, "erin"), _job("s2", 9901, 600, 2, "frank")
    s3, s4 = _job("s3", 9902, 600, 4, "erin"), _job("s4", 9903, 600, 1, "frank")
    dry_runs = [
        # cpsched would start s1 and s2 on s02; Slurm starts s1 there, and s4 a bit later.
        {"time": 10000, "running": [_running(r1, 9000, {"s01": 4})], "queued": [s1, s2, s3, s4]},
        {
            "time": 10060,
            "running": [
                _running(r1, 9000, {"s01": 4}),
                _running(s1, 10000, {"s02": 2}),
                _running(s4, 10030, {"s02": 1}),
            ],
            "queued": [s2, s3],
        },
        # r1, s1 and s4 are done, s2 runs since 10400: cpsched would start s3 on s01 now.
        {"time": 10950, "running": [_running(s2, 10400, {"s02": 2})], "queued": [s3]},
    ]
    finished = [
        {**r1, "start": 9000, "end": 10900, "state": "completed"},
        {**s1, "start": 10000, "end": 10500, "state": "completed"},
        {**s4, "start": 10030, "end": 10200, "state": "completed"},
        {**s2, "start": 10400, "end": 10900, "state": "completed"},
        {**s3, "start": 11000, "end": 11500, "state": "completed"},
    ]
    return [{**d, "nodes": nodes, "dry_run": True} for d in dry_runs], finished
