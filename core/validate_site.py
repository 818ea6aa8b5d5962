"""Independent checks of a decision against the site's rules (:mod:`cpsched.core.site`).

Written from the rules, not from the placement code (:mod:`cpsched.core.site_placement`),
so that a bug there shows here: each start is checked node by node for its partition,
features, reservation windows, exclusivity, node count and units per node, and the job
for its eligibility.
"""

from __future__ import annotations

from collections import Counter

from cpsched.core.problem import Decision, Job, RunningJob, Snapshot, Start
from cpsched.core.site import Partition, ineligible_reason


def site_violations(snapshot: Snapshot, decision: Decision, jobs: dict[str, Job]) -> list[str]:
    """Every site rule the starts of ``decision`` break; ``jobs`` are the queued jobs by id."""
    by_job = site_violations_by_job(snapshot, decision, jobs)
    return [problem for problems in by_job.values() for problem in problems]


def site_violations_by_job(
    snapshot: Snapshot, decision: Decision, jobs: dict[str, Job]
) -> dict[str, list[str]]:
    """The rules each started job breaks, for the jobs that break one."""
    site = snapshot.site
    started = [(s, jobs[s.job_id]) for s in decision.starts if s.job_id in jobs]
    if site.empty and all(job.constraints is None for _, job in started):
        return {}
    users = Counter(node for s, _ in started for node, _ in s.allocation)
    found: dict[str, list[str]] = {}
    for start, job in started:
        problems = _start_violations(snapshot, start, job, users)
        if problems:
            found[start.job_id] = problems
    return found


def _start_violations(snapshot: Snapshot, start: Start, job: Job, users: Counter[int]) -> list[str]:
    site, now = snapshot.site, snapshot.time
    nodes = [node for node, _ in start.allocation if 0 <= node < len(snapshot.nodes)]
    names = [snapshot.nodes[n].name for n in nodes]
    found: list[str] = []
    for reservation in site.reservations:
        mine = job.constraints is not None and job.constraints.reservation == reservation.name
        overlaps = reservation.start < now + job.time_limit and now < reservation.end
        clash = [snapshot.nodes[n].name for n in nodes if n in reservation.nodes]
        if not mine and overlaps and clash:
            found.append(
                f"job {job.id} (limit {job.time_limit} s) would run on {', '.join(clash)} "
                f"into reservation {reservation.name} [{reservation.start}, {reservation.end})"
            )
        if mine and len(clash) < len(nodes):
            found.append(f"job {job.id} runs outside its reservation {reservation.name}")
    c = job.constraints
    if c is None:
        return found
    why = ineligible_reason(c, job.time_limit, site, now)
    if why is not None:
        found.append(f"job {job.id} is started though not eligible: {why}")
    if c.partitions and site.partitions:
        homes = [site.partitions[p] for p in c.partitions if p in site.partitions]
        if not any(_fits_partition(job, nodes, p) for p in homes):
            found.append(
                f"job {job.id} is placed on {', '.join(names)}, not within one of its "
                f"partitions {', '.join(c.partitions)} and their limits"
            )
    if c.features is not None:
        feats = [snapshot.nodes[n].features for n in nodes]
        if c.features.same_for_all:
            ok = any(all(alt <= f for f in feats) for alt in c.features.alternatives)
        else:
            ok = all(c.features.admits(f) for f in feats)
        if not ok:
            found.append(f"job {job.id}: a node lacks the features {c.features.text!r}")
    if c.exclusive:
        for n in nodes:
            if snapshot.free[n] != snapshot.nodes[n].capacity or users[n] > 1:
                found.append(f"exclusive job {job.id} shares node {snapshot.nodes[n].name}")
    count = len(start.allocation)
    if count < c.min_nodes or (c.max_nodes is not None and count > c.max_nodes):
        found.append(
            f"job {job.id} uses {count} nodes, outside {c.min_nodes}..{c.max_nodes or 'any'}"
        )
    if c.tasks_per_node is not None and any(u > c.tasks_per_node for _, u in start.allocation):
        found.append(f"job {job.id} has more than {c.tasks_per_node} units on a node")
    return found


def _fits_partition(job: Job, nodes: list[int], partition: Partition) -> bool:
    return (
        all(n in partition.nodes for n in nodes)
        and (partition.max_time is None or job.time_limit <= partition.max_time)
        and (partition.max_nodes is None or len(nodes) <= partition.max_nodes)
    )


def extension_into_reservation(snapshot: Snapshot, rj: RunningJob, new_limit: int) -> list[str]:
    """A new limit that would carry a running job into a reservation starting later on
    one of its nodes."""
    end = rj.start + new_limit
    return [
        f"extension of job {rj.job.id} to {new_limit} s runs into reservation {r.name} "
        f"from {r.start}"
        for r in snapshot.site.reservations
        if snapshot.time < r.start < end and any(n in r.nodes for n, _ in rj.allocation)
    ]
