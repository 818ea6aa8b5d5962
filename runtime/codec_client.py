"""Dispatch-core types ⇄ wire schema, a client's way: what the replay over HTTP sends (a
snapshot, finished jobs) and reads (a decision). The service's way is
:mod:`cpsched.runtime.codec`; a snapshot sent here and read there is the same snapshot
(``tests/runtime/test_codec_properties.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cpsched.core import Decision, Diagnostics, Extension, Job, Node, RunningJob, Snapshot, Start
from cpsched.core.site import Constraints, Site
from cpsched.wire.schemas import (
    DecisionOut,
    DispatchRequest,
    FinishedJobIn,
    JobEndState,
    JobIn,
    NodeIn,
    PartitionIn,
    ReservationIn,
    RunningJobIn,
)


def _per_unit(job: Job, names: tuple[str, ...]) -> dict[str, int]:
    return {name: amount for name, amount in zip(names, job.unit_request, strict=True) if amount}


def _job_fields(job: Job, names: tuple[str, ...]) -> dict[str, Any]:
    return {
        "id": job.id,
        "user": job.user,
        "group": job.group,
        "name": job.name,
        "partition": (
            ",".join(job.constraints.partitions)
            if job.constraints is not None and job.constraints.partitions
            else job.queue
        ),
        "submit": job.submit,
        "time_limit": job.time_limit,
        "units": job.units,
        "per_unit": _per_unit(job, names),
        "layout": job.layout,
        **_constraint_fields(job.constraints),
        **({"priority": job.priority} if job.priority is not None else {}),
        **({"requeue": True} if job.rerunnable else {}),
    }


def _running_fields(rj: RunningJob, names: tuple[str, ...]) -> dict[str, Any]:
    """A running job's wire fields: its current limit, or a trial's end."""
    limit = {"trial_end": rj.start + rj.time_limit} if rj.trial else {"time_limit": rj.time_limit}
    return {**_job_fields(rj.job, names), **limit}


def _constraint_fields(c: Constraints | None) -> dict[str, Any]:
    """A job's rules as wire fields (only those that say something)."""
    if c is None:
        return {}
    fields: dict[str, Any] = {
        "features": c.features.text if c.features is not None else None,
        "exclusive": c.exclusive,
        "min_nodes": c.min_nodes if c.min_nodes > 1 else None,
        "max_nodes": c.max_nodes,
        "tasks_per_node": c.tasks_per_node,
        "reservation": c.reservation or None,
        "eligible": c.eligible,
        "reason": c.reason,
    }
    return {k: v for k, v in fields.items() if v is not None}


def _site_fields(site: Site, nodes: Sequence[Node]) -> dict[str, Any]:
    return {
        "partitions": [
            PartitionIn(
                name=p.name,
                nodes=[nodes[n].name for n in sorted(p.nodes)],
                max_time=p.max_time,
                max_nodes=p.max_nodes,
            )
            for p in site.partitions.values()
        ],
        "reservations": [
            ReservationIn(
                name=r.name,
                nodes=[nodes[n].name for n in sorted(r.nodes)],
                start=r.start,
                end=r.end,
            )
            for r in site.reservations
        ],
    }


def finished_to_wire(
    job: Job, names: tuple[str, ...], start: int, end: int, state: JobEndState
) -> FinishedJobIn:
    """A finished core job as a client posts it; ``names`` name ``job``'s resource types."""
    return FinishedJobIn(**_job_fields(job, names), start=start, end=end, state=state)


def snapshot_to_wire(snapshot: Snapshot, *, dry_run: bool = False) -> DispatchRequest:
    """A core snapshot as a client posts it."""
    names = snapshot.resource_names
    nodes = snapshot.nodes
    return DispatchRequest(
        time=snapshot.time,
        dry_run=dry_run,
        nodes=[
            NodeIn(
                name=node.name,
                resources=dict(zip(names, node.capacity, strict=True)),
                features=sorted(node.features),
            )
            for node in nodes
        ],
        **_site_fields(snapshot.site, nodes),
        running=[
            RunningJobIn(
                # A trial's limit is its end; the job keeps its own limit on the wire.
                **_running_fields(rj, names),
                start=rj.start,
                allocation={nodes[node].name: units for node, units in rj.allocation},
                extensions=rj.extensions,
            )
            for rj in snapshot.running
        ],
        queued=[JobIn(**_job_fields(job, names)) for job in snapshot.queued],
    )


def decision_from_wire(answer: DecisionOut, snapshot: Snapshot) -> Decision:
    """A service's answer as the core decision it stands for, on ``snapshot``'s nodes."""
    index = {node.name: i for i, node in enumerate(snapshot.nodes)}
    d = answer.diagnostics
    return Decision(
        starts=tuple(
            Start(
                s.job_id,
                tuple((index[name], units) for name, units in s.allocation.items()),
                s.may_drift,
                s.trial_s,
            )
            for s in answer.starts
        ),
        extensions=tuple(
            Extension(e.job_id, e.new_time_limit, e.reason) for e in answer.extensions
        ),
        planned=answer.planned,
        diagnostics=Diagnostics(
            dispatcher=d.dispatcher,
            solver_status=d.solver_status,
            fallback=d.fallback,
            fallback_reason=d.fallback_reason,
            restarts=d.restarts,
            model_variables=d.model_variables,
            model_constraints=d.model_constraints,
            model_intervals=d.model_intervals,
            split_waiting=d.split_waiting,
            split_dropped=d.split_dropped,
            guaranteed=d.guaranteed,
            guarantees_broken=d.guarantees_broken,
            partial=d.partial,
            notes=tuple(d.notes),
        ),
    )
