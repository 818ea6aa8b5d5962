"""Why a queued job waits, in the site's terms: the rules that narrow where and when it
may start (for ``GET /v1/clusters/{cluster}/jobs/{id}``), and what it lacks on the nodes
it may use."""

from __future__ import annotations

from cpsched.core.problem import Amounts, Job, Snapshot
from cpsched.core.site import ineligible_reason, node_choices, reservations_in_the_way


def usable_nodes(snapshot: Snapshot, job: Job) -> list[int]:
    """The nodes ``job`` could be placed on now under the site's rules."""
    features = [node.features for node in snapshot.nodes]
    choices = node_choices(job.constraints, job.time_limit, snapshot.site, features, snapshot.time)
    if any(choice.nodes is None for choice in choices):
        return list(range(len(snapshot.nodes)))
    return sorted({n for choice in choices if choice.nodes is not None for n in choice.nodes})


def free_on(snapshot: Snapshot, nodes: list[int]) -> Amounts:
    """What is free on ``nodes``, per type."""
    total = [0] * len(snapshot.resource_names)
    for n in nodes:
        for r, amount in enumerate(snapshot.free[n]):
            total[r] += amount
    return tuple(total)


def rule_reasons(snapshot: Snapshot, job: Job) -> list[str]:
    """The site's rules that hold ``job`` back or narrow where it may go, in words."""
    site, now, c = snapshot.site, snapshot.time, job.constraints
    held = ineligible_reason(c, job.time_limit, site, now)
    if held is not None:
        return [f"held back: {held}"]
    if c is None and site.empty:
        return []
    usable = usable_nodes(snapshot, job)
    total = len(snapshot.nodes)
    reasons: list[str] = []
    if c is not None and c.partitions:
        reasons.append(f"runs only in partition(s) {', '.join(c.partitions)}")
    if c is not None and c.features is not None:
        reasons.append(f"needs node features {c.features.text!r}")
    if c is not None and c.reservation:
        reasons.append(f"runs only in reservation {c.reservation}")
    for r in reservations_in_the_way(c, job.time_limit, site, now):
        reasons.append(
            f"its limit ({job.time_limit} s) would run into reservation {r.name} "
            f"[{r.start}, {r.end}) on {len(r.nodes)} node(s)"
        )
    if c is not None and c.exclusive:
        whole = sum(1 for n in usable if snapshot.free[n] == snapshot.nodes[n].capacity)
        reasons.append(f"exclusive: needs wholly free nodes ({whole} of those it may use are)")
    if c is not None and c.counts_nodes:
        most = c.max_nodes if c.max_nodes is not None else "any"
        per = f", at most {c.tasks_per_node} units per node" if c.tasks_per_node else ""
        reasons.append(f"needs {c.min_nodes}..{most} nodes{per}")
    if not usable:
        reasons.append("no node it may use now: the rules above leave none")
    elif reasons and len(usable) < total:
        reasons.append(f"may use {len(usable)} of the {total} nodes now")
    return reasons
