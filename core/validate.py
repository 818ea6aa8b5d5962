"""Independent checks of snapshots and decisions (used by tests and, on request, at run time).

These re-derive everything from the allocations instead of trusting a dispatcher's
bookkeeping, so a bug in a dispatcher's capacity tracking cannot hide here.
"""

from __future__ import annotations

from cpsched.core.problem import Decision, Snapshot, make_snapshot
from cpsched.core.validate_site import extension_into_reservation, site_violations
from cpsched.errors import InvalidDecisionError, SnapshotError


def check_snapshot(snapshot: Snapshot) -> None:
    """Raise SnapshotError if ``free`` disagrees with the allocations or a node is over-full."""
    derived = make_snapshot(
        snapshot.time, snapshot.resource_names, snapshot.nodes, snapshot.running, snapshot.queued
    )
    problems: list[str] = []
    if derived.free != snapshot.free:
        problems.append("per-node free capacity disagrees with the running jobs' allocations")
    if derived.free_total != snapshot.free_total:
        problems.append("total free capacity disagrees with the running jobs' allocations")
    if derived.capacity_total != snapshot.capacity_total:
        problems.append("total capacity disagrees with the nodes' capacities")
    for node, row in zip(snapshot.nodes, derived.free, strict=True):
        for name, left in zip(snapshot.resource_names, row, strict=True):
            if left < 0:
                problems.append(f"node {node.name} is over-full in {name} by {-left}")
    submits = [job.submit for job in snapshot.queued]
    if submits != sorted(submits):
        problems.append("the queue is not in submission order")
    whole = {at for rj in snapshot.running if rj.job.exclusive for at, _ in rj.allocation}
    for at in sorted(whole):
        sharing = [rj.job.id for rj in snapshot.running if any(n == at for n, _ in rj.allocation)]
        if len(sharing) > 1:
            problems.append(
                f"node {snapshot.nodes[at].name} runs an exclusive job with others: "
                + ", ".join(sharing)
            )
    ids = [rj.job.id for rj in snapshot.running] + [j.id for j in snapshot.queued]
    if len(ids) != len(set(ids)):
        problems.append("a job id appears twice among running and queued jobs")
    if problems:
        raise SnapshotError("; ".join(problems))


def decision_violations(snapshot: Snapshot, decision: Decision) -> list[str]:
    """Every rule ``decision`` breaks against ``snapshot``; empty when it is valid."""
    violations: list[str] = []
    queued = {j.id: j for j in snapshot.queued}
    # Only the nodes the decision places units on: on Curie's 5,544 nodes a pass over
    # every node took most of a CP call's post-search time, which its deadline must hold.
    used: dict[int, list[int]] = {}
    seen: set[str] = set()
    for start in decision.starts:
        job = queued.get(start.job_id)
        if job is None:
            violations.append(f"job {start.job_id} is started but is not queued")
            continue
        if start.job_id in seen:
            violations.append(f"job {start.job_id} is started twice")
            continue
        seen.add(start.job_id)
        nodes = [node for node, _ in start.allocation]
        if len(nodes) != len(set(nodes)):
            violations.append(f"job {job.id} names a node twice in its allocation")
        units = sum(u for _, u in start.allocation)
        if units != job.units or any(u < 1 for _, u in start.allocation):
            violations.append(f"job {job.id} has {units} of {job.units} units allocated")
        for node, count in start.allocation:
            if not 0 <= node < len(snapshot.nodes):
                violations.append(f"job {job.id} is placed on unknown node {node}")
                continue
            row = used.setdefault(node, [0] * len(snapshot.resource_names))
            for r, want in enumerate(job.unit_request):
                row[r] += count * want
    for node, row in sorted(used.items()):
        for r, (take, have) in enumerate(zip(row, snapshot.free[node], strict=True)):
            if take > have:
                violations.append(
                    f"node {snapshot.nodes[node].name} over capacity in "
                    f"{snapshot.resource_names[r]}: {take} asked, {have} free"
                )
    violations.extend(site_violations(snapshot, decision, queued))
    running = {rj.job.id: rj for rj in snapshot.running} if decision.extensions else {}
    for ext in decision.extensions:
        rj = running.get(ext.job_id)
        if rj is None:
            violations.append(f"extension for job {ext.job_id}, which is not running")
        elif ext.new_limit < rj.time_limit:
            violations.append(
                f"extension would shorten job {ext.job_id}: {rj.time_limit} → {ext.new_limit}"
            )
        else:
            violations.extend(extension_into_reservation(snapshot, rj, ext.new_limit))
    return violations


def check_decision(snapshot: Snapshot, decision: Decision) -> None:
    """Raise InvalidDecisionError listing every violation, if there is any."""
    violations = decision_violations(snapshot, decision)
    if violations:
        raise InvalidDecisionError(violations)
