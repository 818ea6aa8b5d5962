"""Per-call latency of HCP3 against EASY on random Eurora-like snapshots.

python bench/hcp3_latency.py [--snapshots 10] [--sizes 20,50,100] [--deadline 2.0]
                             [--deterministic] [--workers 1] [--seed 1]

64 nodes of 16 cores and 16 GB (memory in units of 1 GB), 32 of them with 2 GPUs;
running jobs fill about 80% of the cores; the queue holds 20/50/100 jobs with lognormal
run times (median 20 min). Durations are the real run times (oracle), limits are 1-3x
them. Both dispatchers decide on the same snapshots; latency is wall time per call.
"hint%" is how much lower the best greedy hint's objective is than the priority-order
plan's, "cp%" how much lower CP-SAT's is than that hint's (means over calls).
"""

from __future__ import annotations

import argparse
import re
import time
from collections import Counter

import numpy as np

from cpsched.core import (
    Allocation,
    Job,
    Node,
    RunningJob,
    Snapshot,
    check_decision,
    make_dispatcher,
    make_snapshot,
)
from cpsched.core.capacity import FreeCapacity
from cpsched.core.cp import SearchConfig, make_cp_dispatcher
from cpsched.core.dispatcher import Dispatcher

RESOURCES = ("core", "mem", "gpu")
NOW = 1_000_000


def machine() -> list[Node]:
    return [Node(f"n{i:02d}", (16, 16, 2 if i < 32 else 0)) for i in range(64)]


def random_job(rng: np.random.Generator, jid: str, submit: int) -> tuple[Job, int]:
    run = int(np.clip(rng.lognormal(np.log(1200), 1.2), 30, 86_400))
    units = 1 if rng.random() < 0.7 else int(rng.integers(2, 9))
    cores = int(rng.choice([1, 2, 4, 8, 16], p=[0.3, 0.2, 0.2, 0.15, 0.15]))
    mem = int(np.clip(cores + rng.integers(-1, 3), 1, 16))
    gpu = int(rng.integers(1, 3)) if rng.random() < 0.2 else 0
    limit = int(run * rng.uniform(1.0, 3.0)) + 1
    job = Job(jid, submit, limit, units, (cores, mem, gpu), user=f"u{rng.integers(20)}")
    return job, run


def random_snapshot(rng: np.random.Generator, queued: int) -> tuple[Snapshot, dict[str, int]]:
    nodes = machine()
    capacities = [n.capacity for n in nodes]
    total = tuple(sum(column) for column in zip(*capacities, strict=True))
    free = FreeCapacity(capacities, total, total)
    durations: dict[str, int] = {}
    running: list[RunningJob] = []
    target = 0.8 * free.capacity_total[0]
    tries = 0
    while free.capacity_total[0] - free.total[0] < target and tries < 2000:
        tries += 1
        job, run = random_job(rng, f"r{tries}", NOW - 100_000)
        allocation = _place_randomly(rng, job, free)
        if allocation is None:
            continue
        free.take(allocation, job)
        elapsed = int(rng.uniform(0, run))
        running.append(RunningJob(job, NOW - elapsed, job.time_limit, allocation))
        durations[job.id] = run
    queue: list[Job] = []
    for i in range(queued):
        job, run = random_job(rng, f"q{i}", NOW - int(rng.uniform(0, 3 * 3600)))
        queue.append(job)
        durations[job.id] = run
    return make_snapshot(NOW, RESOURCES, nodes, running, queue), durations


def _place_randomly(rng: np.random.Generator, job: Job, free: FreeCapacity) -> Allocation | None:
    order = rng.permutation(free.node_count)
    placed: list[tuple[int, int]] = []
    needed = job.units
    for node in order:
        row = free.row(int(node))
        fit = min(row[r] // a for r, a in job.wanted)
        if fit:
            take = min(fit, needed)
            placed.append((int(node), take))
            needed -= take
            if not needed:
                return tuple(sorted(placed))
    return None


def objectives(notes: tuple[str, ...]) -> tuple[float, float, float] | None:
    """(priority-greedy, best hint, CP) objectives, read back from HCP3's notes."""
    text = " ".join(notes)
    hints = dict(re.findall(r"(priority greedy|ratio greedy|heuristic-seeded) (\d+)", text))
    found = re.search(r"run\(s\), objective (\d+)", text)
    if not hints or found is None:
        return None
    return float(hints["priority greedy"]), float(min(map(int, hints.values()))), float(found[1])


def measure(dispatcher: Dispatcher, cases: list[tuple[Snapshot, dict[str, int]]]) -> dict:
    latencies, statuses, starts = [], Counter(), []
    gains: list[tuple[float, float]] = []
    variables, intervals, fallbacks = [], [], 0
    for snap, durations in cases:
        t0 = time.perf_counter()
        decision = dispatcher.decide(snap, durations)
        latencies.append(time.perf_counter() - t0)
        check_decision(snap, decision)
        d = decision.diagnostics
        statuses[d.solver_status] += 1
        starts.append(len(decision.starts))
        variables.append(d.model_variables)
        intervals.append(d.model_intervals)
        fallbacks += d.fallback
        values = objectives(d.notes)
        if values is not None and values[0] > 0:
            priority, hint, cp = values
            gains.append((1 - hint / priority, 1 - cp / hint if hint else 0.0))
    ms = np.array(latencies) * 1000
    return {
        "p50": np.percentile(ms, 50),
        "p99": np.percentile(ms, 99),
        "max": ms.max(),
        "starts": np.mean(starts),
        "vars": np.mean(variables),
        "intervals": np.mean(intervals),
        "status": dict(statuses),
        "fallbacks": fallbacks,
        # Mean objective reduction: best greedy hint vs the priority greedy plan, and
        # CP-SAT's solution vs that hint.
        "hint_gain": 100 * np.mean([g for g, _ in gains]) if gains else float("nan"),
        "cp_gain": 100 * np.mean([g for _, g in gains]) if gains else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--snapshots", type=int, default=10)
    parser.add_argument("--sizes", default="20,50,100")
    parser.add_argument("--deadline", type=float, default=SearchConfig().deadline)
    parser.add_argument("--deterministic", action="store_true")
    parser.add_argument("--workers", type=int, default=SearchConfig().num_workers)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    search = SearchConfig(
        deadline=args.deadline, deterministic=args.deterministic, num_workers=args.workers
    )
    dispatchers: list[Dispatcher] = [
        make_dispatcher("easy", "best-fit"),
        make_cp_dispatcher("hcp3", "best-fit", search),
    ]
    print(
        f"{args.snapshots} snapshots per size; deadline {args.deadline} s; "
        f"{args.workers} worker(s); "
        f"{'deterministic' if args.deterministic else 'wall-time'} limits"
    )
    header = f"{'queue':>5} {'dispatcher':<6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} "
    print(
        header
        + f"{'starts':>6} {'vars':>5} {'ivals':>5} {'fb':>3} {'hint%':>6} {'cp%':>5}  statuses"
    )
    rng = np.random.default_rng(args.seed)
    for size in (int(s) for s in args.sizes.split(",")):
        cases = [random_snapshot(rng, size) for _ in range(args.snapshots)]
        for dispatcher in dispatchers:
            m = measure(dispatcher, cases)
            print(
                f"{size:>5} {dispatcher.name:<6} {m['p50']:8.1f} {m['p99']:8.1f} {m['max']:8.1f} "
                f"{m['starts']:6.1f} {m['vars']:5.0f} {m['intervals']:5.0f} {m['fallbacks']:3d} "
                f"{m['hint_gain']:6.1f} {m['cp_gain']:5.1f}  {m['status']}"
            )


if __name__ == "__main__":
    main()
