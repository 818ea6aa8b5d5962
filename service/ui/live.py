"""What a cluster looks like now: its last snapshot and decision, as plain rows.

Copied out of the cluster's runtime under its lock (a dispatch may be replacing them),
then laid out without the lock held. The rows are in the snapshot's terms: names for
nodes, seconds for times on the cluster's clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cpsched.core import Decision, Job, Snapshot
from cpsched.core.explain import rule_reasons
from cpsched.core.problem import Amounts
from cpsched.service.cluster import ClusterRuntime
from cpsched.service.pending import waits_for

QUEUE_ROWS = 500
"""Queued jobs listed on the page (in queue order); the count says how many more wait."""


@dataclass(frozen=True, slots=True)
class QueuedRow:
    job_id: str
    user: str
    shape: str
    """Units and what each needs, e.g. ``4 × cpu 2, mem 4000``."""
    predicted_s: int | None
    planned_start: int | None
    """When the last decision's plan starts it (None: not planned, or no plan)."""
    starting_now: bool
    waits_for: dict[str, int]
    """What it lacks on the nodes it may use, once the jobs starting now have started."""
    rules: list[str]
    """The site's rules holding it back or narrowing where it may go, in words."""
    wait_s: int
    """How long it has waited, as of the snapshot."""
    limit_s: int = 0
    """Its time limit (the user's request)."""
    partition: str = ""
    priority: int | None = None
    """The site's priority, when the workload manager sends one."""
    guaranteed_start: int | None = None
    """The start it is guaranteed (the policy's ``wait_bound``), if it holds one."""


@dataclass(frozen=True, slots=True)
class Placed:
    """A running job, or one the last decision starts, on the nodes it holds."""

    job_id: str
    user: str
    start: int
    predicted_end: int
    nodes: dict[str, int]
    """Units per node name."""
    starting: bool


@dataclass(frozen=True, slots=True)
class PlannedStart:
    """A queued job the plan starts later, on resources not chosen yet (the CP plans
    on pooled capacity; nodes are picked when the job starts)."""

    job_id: str
    start: int
    predicted_end: int


@dataclass(frozen=True, slots=True)
class LiveView:
    time: int
    dispatcher: str
    fallback: bool
    fallback_reason: str | None
    nodes: list[str]
    queue: list[QueuedRow]
    queued_total: int
    placed: list[Placed]
    planned: list[PlannedStart]
    rejected: dict[str, str] = field(default_factory=dict)
    first: int = 0
    """The queue position (from 0) of the first row listed."""


def live_view(runtime: ClusterRuntime, limit: int = QUEUE_ROWS, first: int = 0) -> LiveView | None:
    """The cluster as its last snapshot and decision show it, the queue from position
    ``first`` (``limit`` rows); None before the first snapshot since the service started."""
    with runtime.lock:
        snapshot, decision = runtime.last_snapshot, runtime.last_decision
        if snapshot is None or decision is None:
            return None
        durations = dict(runtime.book.durations)
        rejected = dict(runtime.last_rejected)
        state = runtime.dispatcher_state
        guaranteed = {job_id: g.start_by for job_id, g in state.guarantees.items()} if state else {}
    planned = dict(decision.planned or {})
    starting = {s.job_id for s in decision.starts}
    free = free_after(snapshot, decision)
    return LiveView(
        time=snapshot.time,
        dispatcher=decision.diagnostics.dispatcher,
        fallback=decision.diagnostics.fallback,
        fallback_reason=decision.diagnostics.fallback_reason,
        nodes=[n.name for n in snapshot.nodes],
        queue=[
            _queued_row(snapshot, job, durations, planned, job.id in starting, free, guaranteed)
            for job in snapshot.queued[first : first + limit]
        ],
        queued_total=len(snapshot.queued),
        placed=_placed(snapshot, decision, durations),
        planned=[
            PlannedStart(job.id, planned[job.id], planned[job.id] + durations.get(job.id, 0))
            for job in snapshot.queued
            if job.id in planned and job.id not in starting
        ],
        rejected=rejected,
        first=first,
    )


def shape(job: Job, names: tuple[str, ...]) -> str:
    """``units × type amount, ...`` of a job's request."""
    per_unit = ", ".join(f"{n} {a}" for n, a in zip(names, job.unit_request, strict=True) if a)
    return f"{job.units} × {per_unit}"


def free_after(snapshot: Snapshot, decision: Decision) -> list[Amounts]:
    """What is free on each node once the jobs ``decision`` starts hold their share."""
    free = [list(room) for room in snapshot.free]
    by_id = {job.id: job for job in snapshot.queued}
    for start in decision.starts:
        unit = by_id[start.job_id].unit_request
        for node, units in start.allocation:
            free[node] = [room - units * need for room, need in zip(free[node], unit, strict=True)]
    return [tuple(room) for room in free]


def _queued_row(
    snapshot: Snapshot,
    job: Job,
    durations: dict[str, int],
    planned: dict[str, int],
    starting: bool,
    free: list[Amounts],
    guaranteed: dict[str, int],
) -> QueuedRow:
    rules = [] if starting else rule_reasons(snapshot, job)
    return QueuedRow(
        job_id=job.id,
        user=job.user,
        shape=shape(job, snapshot.resource_names),
        predicted_s=durations.get(job.id),
        planned_start=snapshot.time if starting else planned.get(job.id),
        starting_now=starting,
        waits_for={} if starting else waits_for(snapshot, job, rules, free),
        rules=rules,
        wait_s=max(0, snapshot.time - job.submit),
        limit_s=job.time_limit,
        partition=job.queue,
        priority=job.priority,
        guaranteed_start=None if starting else guaranteed.get(job.id),
    )


def _placed(snapshot: Snapshot, decision: Decision, durations: dict[str, int]) -> list[Placed]:
    names = [n.name for n in snapshot.nodes]
    placed = [
        Placed(
            job_id=rj.job.id,
            user=rj.job.user,
            start=rj.start,
            predicted_end=rj.start + durations.get(rj.job.id, rj.time_limit),
            nodes={names[i]: units for i, units in rj.allocation},
            starting=False,
        )
        for rj in snapshot.running
    ]
    queued = {job.id: job for job in snapshot.queued}
    for start in decision.starts:
        job = queued[start.job_id]
        placed.append(
            Placed(
                job_id=job.id,
                user=job.user,
                start=snapshot.time,
                predicted_end=snapshot.time + durations.get(job.id, job.time_limit),
                nodes={names[i]: units for i, units in start.allocation},
                starting=True,
            )
        )
    return placed
