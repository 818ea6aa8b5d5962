"""Why a queued job waits: the site's rules holding it, what it lacks on the nodes it may
use, who goes before it, when it is planned.

Read from the cluster's last snapshot and decision; used by the job endpoint and by the
dashboard's queue.
"""

from __future__ import annotations

from collections.abc import Sequence

from cpsched.core import Decision, Job, Snapshot
from cpsched.core.explain import rule_reasons, usable_nodes
from cpsched.core.problem import Amounts
from cpsched.wire.schemas import PendingReason


def waits_for(
    snapshot: Snapshot,
    job: Job,
    rules: Sequence[str] = (),
    free: Sequence[Amounts] | None = None,
) -> dict[str, int]:
    """The amount of each resource type ``job`` lacks on the nodes it may use now (all of
    them unless site ``rules`` narrow them). ``free``: what is free on each node, when not
    the snapshot's (the dashboard's: once the jobs starting now hold their share)."""
    if not rules and free is None:
        have = snapshot.free_total
    else:
        per_node = snapshot.free if free is None else free
        nodes = usable_nodes(snapshot, job) if rules else range(len(snapshot.nodes))
        have = tuple(
            sum(per_node[n][r] for n in nodes) for r in range(len(snapshot.resource_names))
        )
    return {
        name: need - room
        for name, need, room in zip(snapshot.resource_names, job.request, have, strict=True)
        if need > room
    }


def pending(
    snapshot: Snapshot,
    decision: Decision | None,
    position: int,
    split_wait: int | None = None,
    guaranteed: int | None = None,
    today_start: int | None = None,
) -> PendingReason:
    """Why the ``position``-th queued job is not running: the rules holding it, what it
    lacks on the nodes it may use, who goes before it (in the plan when there is one, else
    in the queue) and its planned start. ``split_wait``: since when it has waited for nodes
    where Slurm's split of its tasks cannot drift (:mod:`cpsched.core.steady_blocks`);
    ``guaranteed``: the start it is guaranteed (:mod:`cpsched.core.wait_bound`);
    ``today_start``: when today's scheduler, run beside, started it
    (:mod:`cpsched.core.today_schedule`)."""
    job = snapshot.queued[position]
    reasons = rule_reasons(snapshot, job)
    lacks = waits_for(snapshot, job, reasons)
    if split_wait is not None:
        reasons.append(
            f"fits, but waits (since {split_wait}, for at most the policy's split_wait) for "
            "nodes where no running job's end can change how Slurm spreads its tasks"
        )
    planned = dict(decision.planned) if decision is not None and decision.planned else {}
    mine = planned.get(job.id)
    if mine is not None:
        ahead = [
            other.id
            for other in snapshot.queued
            if other.id != job.id and planned.get(other.id, mine + 1) <= mine
        ]
    else:
        ahead = [other.id for other in snapshot.queued[:position]]
    return PendingReason(
        waits_for=lacks,
        jobs_ahead=ahead,
        planned_start=mine,
        guaranteed_start=guaranteed,
        today_start=today_start,
        rules=reasons,
    )
