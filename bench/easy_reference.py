"""An independent EASY backfilling, to check cpsched's EASY against, start time by start time.

Textbook EASY (Lifka 1995; Mu'alem and Feitelson 2001) on a machine where only the
processor count matters (one processor per unit, as every SWF machine here that has
one-processor nodes): jobs start in submission order while they fit; the first job that
does not fit gets a reservation at the *shadow time*, when enough running jobs have
ended by their estimates, and the processors left over then are the *extra* ones; a later
job may start now if it fits now and either ends by the shadow time or uses only extra
processors. Written from the papers, sharing nothing with ``cpsched.core`` but the trace
reader; the event loop follows the replay's (ends, then submissions, then one pass).

    python bench/easy_reference.py TRACE [--system systems/X.toml] [--jobs N]

replays TRACE with this EASY and with cpsched's (``--dispatcher easy --predictor
wall-time``) and prints how many jobs start at the same second, and the first that do not.
"""

from __future__ import annotations

import argparse
import heapq
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class RefJob:
    id: str
    submit: int
    procs: int
    estimate: int
    """What the scheduler plans with: the user's request."""
    run: int
    """What the job really runs."""


def shadow_time(
    t: int, running: Iterable[tuple[int, int]], free: int, need: int
) -> tuple[int | None, int]:
    """When ``need`` processors are free if running jobs end by their estimates (an overdue
    one "any second"), and how many more are free then; (None, 0) if never."""
    planned = sorted((max(t + 1, base), procs) for base, procs in running)
    avail = free
    i = 0
    while i < len(planned):
        end = planned[i][0]
        while i < len(planned) and planned[i][0] == end:  # jobs ending together
            avail += planned[i][1]
            i += 1
        if avail >= need:
            return end, avail - need
    return None, 0


def reference_easy(jobs: Sequence[RefJob], processors: int) -> dict[str, int]:
    """Start time of every job under textbook EASY; ``jobs`` in submission order."""
    starts: dict[str, int] = {}
    running: dict[str, tuple[int, int]] = {}  # id -> (start + estimate, procs)
    queue: list[RefJob] = []
    free = processors
    submitted = 0
    events: list[tuple[int, str]] = []  # (real end, job id)
    never = 1 << 62
    while submitted < len(jobs) or events:
        t = min(
            jobs[submitted].submit if submitted < len(jobs) else never,
            events[0][0] if events else never,
        )
        while events and events[0][0] <= t:
            _, job_id = heapq.heappop(events)
            free += running.pop(job_id)[1]
        while submitted < len(jobs) and jobs[submitted].submit <= t:
            queue.append(jobs[submitted])
            submitted += 1
        if not queue:
            continue
        started: list[RefJob] = []
        head: RefJob | None = None
        for job in queue:
            if job.procs > processors:
                continue  # never fits: skipped, as every scheduler must
            if job.procs > free:
                head = job
                break
            free -= job.procs
            started.append(job)
            running[job.id] = (t + job.estimate, job.procs)
        if head is not None:
            shadow, extra = shadow_time(t, running.values(), free, head.procs)
            after = queue.index(head) + 1
            for job in queue[after:]:
                if job.procs > free:
                    continue
                ends_in_time = shadow is None or t + max(1, job.estimate) <= shadow
                if not ends_in_time and job.procs > extra:
                    continue
                if not ends_in_time:
                    extra -= job.procs
                free -= job.procs
                started.append(job)
                running[job.id] = (t + job.estimate, job.procs)
        done = {job.id for job in started}
        for job in started:
            starts[job.id] = t
            heapq.heappush(events, (t + job.run, job.id))
        queue = [job for job in queue if job.id not in done]
    return starts


def main() -> None:
    from cpsched.core import make_dispatcher
    from cpsched.predictor.walltime import WallTime
    from cpsched.replay.runner import resolve_system
    from cpsched.replay.simulator import Simulator
    from cpsched.replay.swf import read_swf

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--system", type=Path)
    parser.add_argument("--jobs", type=int)
    args = parser.parse_args()
    system = resolve_system(args.trace, args.system)
    if any(n.capacity != (1,) for n in system.nodes) or system.resource_names != ("cpu",):
        raise SystemExit("the reference EASY models one-processor nodes only")
    trace = read_swf(args.trace, system, limit=args.jobs).jobs
    ref_jobs = [
        RefJob(tj.job.id, tj.job.submit, tj.job.units, tj.job.time_limit, tj.run_time)
        for tj in trace
    ]
    began = time.perf_counter()
    reference = reference_easy(ref_jobs, len(system.nodes))
    ref_s = time.perf_counter() - began
    began = time.perf_counter()
    sim = Simulator(system, trace, make_dispatcher("easy", "best-fit", plan=False), WallTime())
    result = sim.run()
    ours_s = time.perf_counter() - began
    ours = dict(zip(result.jobs.job_id, result.jobs.start.tolist(), strict=True))
    differ = [job.id for job in ref_jobs if reference[job.id] != ours[job.id]]
    print(
        f"{args.trace.name}: {len(ref_jobs)} jobs, {len(ref_jobs) - len(differ)} start at the "
        f"same second ({len(differ)} differ); reference {ref_s:.1f} s, cpsched {ours_s:.1f} s"
    )
    for job_id in differ[:5]:
        print(f"  job {job_id}: reference {reference[job_id]}, cpsched {ours[job_id]}")


if __name__ == "__main__":
    main()
