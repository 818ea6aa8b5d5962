"""ClusterState → the service's wire types (DispatchRequest, FinishedJobIn)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from cpsched.slurm_bridge.model import ClusterState, JobView
from cpsched.wire.schemas import (
    DispatchRequest,
    FinishedJobIn,
    JobIn,
    NodeIn,
    RunningJobIn,
    end_state,
)

log = logging.getLogger("slurm_bridge.snapshot")


# A multi-node job (sbatch -N k) can only run with one unit per node, and the wire
# schema has no "at most one unit per node" field. Each node therefore offers one
# NODE_SLOT and each unit of such a job takes one: the dispatcher cannot stack two of
# its units on a node. (Two -N jobs then never share a node: safe, a little wasteful.)
NODE_SLOT = "node"


def _per_unit(job: JobView) -> dict[str, int]:
    amounts = {r: a for r, a in job.shape.per_unit.items() if a > 0}
    if job.shape.one_unit_per_node:
        amounts[NODE_SLOT] = 1
    return amounts


def _job_fields(job: JobView) -> dict:
    return {
        "id": job.id,
        "user": job.user,
        "group": job.group,
        "name": job.name,
        "partition": job.partition,
        "submit": job.submit,
        "time_limit": job.time_limit_s,
        "units": job.shape.units,
        "per_unit": _per_unit(job),
    }


def queued_jobs(state: ClusterState, *, shadow: bool) -> list[JobView]:
    """Jobs cpsched decides on: held for it (active) or every pending one (shadow)."""
    if shadow:
        return state.pending
    return state.held


def dispatch_request(
    state: ClusterState,
    *,
    shadow: bool,
    extensions: Mapping[str, int],
) -> tuple[DispatchRequest, list[str]]:
    """The snapshot to post, and notes on jobs left out (and why)."""
    notes: list[str] = []
    nodes = [
        NodeIn(name=n.name, resources={**n.capacity, NODE_SLOT: 1}, state=n.state)
        for n in state.nodes.values()
    ]
    running: list[RunningJobIn] = []
    for job in state.running:
        if not job.allocation or job.start is None:
            notes.append(f"running job {job.id}: no allocation read; left out")
            continue
        outside = [n for n in job.allocation if n not in state.nodes]
        if outside:
            # Spans nodes of a partition the bridge does not manage: its share on our
            # nodes is still busy, but the unit count would not add up; Slurm's own
            # "used" figures still protect those nodes when starts are validated.
            notes.append(f"running job {job.id}: on unmanaged nodes {outside}; left out")
            continue
        running.append(
            RunningJobIn(
                **_job_fields(job),
                start=job.start,
                allocation=dict(job.allocation),
                extensions=extensions.get(job.id, 0),
            )
        )
    queued = [JobIn(**_job_fields(j)) for j in queued_jobs(state, shadow=shadow)]
    return (
        DispatchRequest(
            time=state.time, nodes=nodes, running=running, queued=queued, dry_run=shadow
        ),
        notes,
    )


def finished_batch(jobs: Iterable[JobView]) -> list[FinishedJobIn]:
    """Ended jobs in wire form; jobs without a usable start/end are skipped."""
    out: list[FinishedJobIn] = []
    for job in jobs:
        if job.start is None or job.end is None:
            continue
        out.append(
            FinishedJobIn(
                **_job_fields(job), start=job.start, end=job.end, state=end_state(job.state)
            )
        )
    return out
