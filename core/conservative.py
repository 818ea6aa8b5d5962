"""Backfilling with reservations for the first ``depth`` blocked jobs (conservative).

Jobs are taken in queue order; each starts now if it fits now for its whole duration
without touching the reservations made so far, else it gets a reservation at the first
time it fits (:func:`~cpsched.core.profile.make_profile`), until ``depth`` jobs hold one.
The jobs after that start only if they fit now, around every reservation. With
``depth = 1`` this is EASY (the list dispatcher's faster code does that case); with
``depth`` at least the queue length it is conservative backfilling (Mu'alem and
Feitelson 2001), as Slurm's sched/backfill plans up to its ``bf_max_job_test`` jobs.
"""

from __future__ import annotations

from dataclasses import dataclass

from cpsched.core.allocators import Allocator
from cpsched.core.capacity import FreeCapacity
from cpsched.core.durations import Durations
from cpsched.core.problem import Job, Snapshot, Start
from cpsched.core.profile import make_profile
from cpsched.core.reservation import running_releases


@dataclass(frozen=True, slots=True)
class Plan:
    starts: list[Start]
    planned: dict[str, int]
    """Reserved start of each job holding a reservation."""
    notes: list[str]


def backfill_with_depth(
    snapshot: Snapshot,
    durations: Durations,
    queue: list[Job],
    allocator: Allocator,
    depth: int,
    *,
    shortest_backfilled_first: bool = False,
) -> Plan:
    """Start and reserve ``queue`` (in priority order) with up to ``depth`` reservations;
    the jobs after the last reservation are tried shortest first if asked (EASY++)."""
    profile = make_profile(
        snapshot.time, FreeCapacity.of(snapshot), running_releases(snapshot, durations, [], [])
    )
    starts: list[Start] = []
    planned: dict[str, int] = {}
    notes: list[str] = []
    rest: list[Job] = []
    for i, job in enumerate(queue):
        if len(planned) >= depth:
            rest = queue[i:]
            break
        duration = max(1, durations[job.id])
        found = profile.earliest(job, duration, allocator)
        if found is None:
            notes.append(f"job {job.id} cannot be placed even on an idle machine; skipped")
            continue
        step, allocation = found
        if step == 0:
            starts.append(Start(job.id, allocation))
        else:
            planned[job.id] = profile.times[step]
        profile.take(step, duration, allocation, job)
    if shortest_backfilled_first:
        rest.sort(key=lambda job: durations[job.id])
    for job in rest:
        if not profile.fits_now_total(job.request):
            continue
        duration = max(1, durations[job.id])
        found = profile.earliest(job, duration, allocator, now_only=True)
        if found is not None:
            starts.append(Start(job.id, found[1]))
            profile.take(0, duration, found[1], job)
    return Plan(starts, planned, notes)
