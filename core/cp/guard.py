"""Anti-starvation guard of the CP dispatchers (beyond the papers; see ``ModelConfig``).

The pooled slowdown objective weighs a job by ``1/d_i`` only, and the reduction drops a
job that cannot start at ``t``: a big job behind a steady stream of small ones is then
never modelled, or always delayed in favour of them. Its growing priority only helps
once something *uses* it: here one job gets EASY's reservation (the earliest time its
units can be placed as the running jobs end), the model may not start it later than
that, and jobs started now must leave it intact. That job is the longest-waiting one
once it has waited ``reserve_after`` seconds (if set), else the highest-priority one
above the slowdown threshold ``reserve_above``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cpsched.core.allocators import Allocator
from cpsched.core.capacity import FreeCapacity
from cpsched.core.cp.prepare import fits_idle_machine
from cpsched.core.durations import Durations, expected_end
from cpsched.core.problem import Job, Snapshot
from cpsched.core.reservation import Release, Reservation, reserve


@dataclass(frozen=True, slots=True)
class Guard:
    job: Job
    start_by: int
    """Absolute time (s) by which the job can be placed: ``t`` when it fits now."""
    reservation: Reservation | None
    """EASY's reservation when it cannot start now (mutable: the allocation step takes
    from its spare capacity); None when it can start now."""


def starving_job(
    order: Sequence[Job],
    prios: Mapping[str, float],
    snapshot: Snapshot,
    above: float | None,
    after: int | None = None,
) -> Job | None:
    """The job to protect, among those an idle machine could host: the longest-waiting
    one that has waited at least ``after`` seconds, else the highest-priority one with
    priority ≥ ``above``. None if neither exists (or both triggers are None).

    The wait trigger comes first: it is the one that bounds how long any job waits.
    """
    if after is not None:
        for job in sorted(order, key=lambda j: j.submit):
            if snapshot.time - job.submit < after:
                break
            if fits_idle_machine(job, snapshot):
                return job
    if above is not None:
        # ``order`` is by priority, so the scan stops at the first job under the threshold.
        for job in order:
            if prios[job.id] < above:
                break
            if fits_idle_machine(job, snapshot):
                return job
    return None


def protect(
    job: Job, snapshot: Snapshot, durations: Durations, allocator: Allocator
) -> Guard | None:
    """``job``'s reservation: now if it can be placed now, else when enough running jobs
    have ended (their expected ends use the underestimation fix). None if never."""
    free = FreeCapacity.of(snapshot)
    if allocator.place(job, free) is not None:
        return Guard(job, snapshot.time, None)
    now = snapshot.time
    releases: list[Release] = [
        (expected_end(rj, durations[rj.job.id], now), rj.allocation, rj.job)
        for rj in snapshot.running
    ]
    reservation = reserve(job, free, releases, allocator)
    if reservation is None:
        return None
    return Guard(job, reservation.time, reservation)
