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
from cpsched.service.ui.queue_order import QueueFacts, QueueQuery, choices, ordered, page_of

QUEUE_ROWS = 500
"""Queued jobs listed on a page of the queue; the pages cover the whole queue."""


@dataclass(frozen=True, slots=True)
class QueuedRow:
    position: int
    """Its place in the queue's order (from 1), whatever the page's order."""
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
    qos: str = ""
    """Its QOS, when the workload manager sends one."""
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
    """The index (from 0) of the first row listed among the jobs the query keeps."""
    matched: int = 0
    """Queued jobs the query's filters keep (all of them without a filter)."""
    page: int = 1
    pages: int = 1
    choices: dict[str, list[str]] = field(default_factory=dict)
    """The values each filter may take in this queue (user, partition, qos)."""


def live_view(
    runtime: ClusterRuntime,
    query: QueueQuery | None = None,
    page: int = 1,
    limit: int = QUEUE_ROWS,
) -> LiveView | None:
    """The cluster as its last snapshot and decision show it, with page ``page``
    (``limit`` rows) of the queued jobs ``query`` keeps, in its order; None before the
    first snapshot since the service started."""
    with runtime.lock:
        snapshot, decision = runtime.last_snapshot, runtime.last_decision
        if snapshot is None or decision is None:
            return None
        durations = dict(runtime.book.durations)
        rejected = dict(runtime.last_rejected)
        state = runtime.dispatcher_state
        guaranteed = {job_id: g.start_by for job_id, g in state.guarantees.items()} if state else {}
        held = runtime.held  # the wire's jobs: what the core's leave out (the QOS)
        qos = {job_id: j.qos for job_id, j in held.queued.items() if j.qos} if held else {}
    planned = dict(decision.planned or {})
    starting = {s.job_id for s in decision.starts}
    free = free_after(snapshot, decision)
    facts = QueueFacts(snapshot.time, qos, durations, planned, frozenset(starting))
    rows = ordered(snapshot, query or QueueQuery(), facts)
    page, pages, first = page_of(rows, page, limit)
    return LiveView(
        time=snapshot.time,
        dispatcher=decision.diagnostics.dispatcher,
        fallback=decision.diagnostics.fallback,
        fallback_reason=decision.diagnostics.fallback_reason,
        nodes=[n.name for n in snapshot.nodes],
        queue=[
            _queued_row(snapshot, job, facts, position, free, guaranteed)
            for position, job in rows[first : first + limit]
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
        matched=len(rows),
        page=page,
        pages=pages,
        choices=choices(snapshot, qos),
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
    facts: QueueFacts,
    position: int,
    free: list[Amounts],
    guaranteed: dict[str, int],
) -> QueuedRow:
    starting = job.id in facts.starting
    rules = [] if starting else rule_reasons(snapshot, job)
    return QueuedRow(
        position=position + 1,
        job_id=job.id,
        user=job.user,
        shape=shape(job, snapshot.resource_names),
        predicted_s=facts.durations.get(job.id),
        planned_start=snapshot.time if starting else facts.planned.get(job.id),
        starting_now=starting,
        waits_for={} if starting else waits_for(snapshot, job, rules, free),
        rules=rules,
        wait_s=max(0, snapshot.time - job.submit),
        limit_s=job.time_limit,
        partition=job.queue,
        qos=facts.qos.get(job.id, ""),
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
