"""Filling what a pooled plan leaves idle: the fallback's starts on what is left.

HCP3 plans on pooled resources; a job it plans at ``t`` may still not fit node by node
(fragmentation, or beside a guarded job's reservation) and waits for the next call. The
capacity the plan gave it then stays idle although other jobs could use it: on the live
Slurm test bed such calls started nothing where EASY started one or two jobs. So, after
the plan's starts, the fallback heuristic (EASY) decides on what is left, and its starts
are kept where they leave the guarded job's reservation intact.
"""

from __future__ import annotations

from cpsched.core.allocators import Allocator
from cpsched.core.capacity import FreeCapacity, after_starts, covers, units_fitting
from cpsched.core.cp.guard import Guard, protect
from cpsched.core.dispatcher import Dispatcher
from cpsched.core.durations import Durations
from cpsched.core.problem import Allocation, Job, Snapshot, Start
from cpsched.core.reservation import Reservation


def fill(
    snapshot: Snapshot,
    durations: Durations,
    starts: list[Start],
    fallback: Dispatcher,
    guard: Guard | None,
    allocator: Allocator,
) -> list[Start]:
    """The starts ``fallback`` adds to ``starts`` on ``snapshot``, keeping only those
    that leave the guarded job's reservation intact (:func:`guarded_reservation`): a job
    still running at its time must fit in what it leaves spare."""
    rest = after_starts(snapshot, starts)
    reservation = guarded_reservation(guard, rest, durations, allocator)
    jobs = {job.id: job for job in rest.queued}
    added: list[Start] = []
    for start in fallback.decide(rest, durations).starts:
        job = jobs[start.job_id]
        if reservation is not None and snapshot.time + durations[job.id] > reservation.time:
            if not holds(reservation.spare(), start.allocation, job):
                continue
            reservation.take(start.allocation, job)
        added.append(start)
    return added


def guarded_reservation(
    guard: Guard | None, rest: Snapshot, durations: Durations, allocator: Allocator
) -> Reservation | None:
    """The reservation the fill must leave intact, on ``rest`` (the plan's starts made):
    the guard's own (already charged with those starts), or, for a guarded job that could
    start at ``t`` but was not placed (a higher-priority job took its room), one made
    now, as the running jobs and the plan's starts end. None when no job is guarded, the
    guarded job starts now, or it can never be placed."""
    if guard is None:
        return None
    if guard.reservation is not None:
        return guard.reservation
    if all(job.id != guard.job.id for job in rest.queued):
        return None
    again = protect(guard.job, rest, durations, allocator)
    return None if again is None else again.reservation


def holds(free: FreeCapacity, allocation: Allocation, job: Job) -> bool:
    """Whether ``job`` fits in ``free`` at ``allocation``: each node has what its units
    need (an exclusive job: the whole node)."""
    nodes = free.nodes
    for node, units in allocation:
        row = free.row(node)
        if job.exclusive and nodes is not None:
            if not covers(row, nodes[node].capacity):
                return False
        elif units_fitting(row, job.wanted) < units:
            return False
    return True
