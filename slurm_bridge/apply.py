"""Apply a decision to the workload manager, checking each start against fresh state.

A start is applied only if, in the state read this cycle, the job is still pending and
held for cpsched, every chosen node exists, is up and has room (Slurm's own "allocated"
figures, minus what this cycle already started), and the allocation has a shape the job
can take (one node for a single-node job, distinct nodes for a one-unit-per-node job).
Anything refused stays held and is planned again next cycle.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from cpsched.slurm_bridge.backend import WorkloadManager
from cpsched.slurm_bridge.errors import CommandError
from cpsched.slurm_bridge.model import Amounts, ClusterState, JobView
from cpsched.wire.schemas import DecisionOut

log = logging.getLogger("slurm_bridge.apply")


@dataclass
class ApplyResult:
    started: dict[str, list[str]] = field(default_factory=dict)  # job → chosen nodes
    refused: dict[str, str] = field(default_factory=dict)  # job → why
    extended: dict[str, int] = field(default_factory=dict)  # job → new limit (s)
    failed: dict[str, str] = field(default_factory=dict)  # job → command error


def _shape_problem(job: JobView, allocation: dict[str, int]) -> str | None:
    if sum(allocation.values()) != job.shape.units or any(u <= 0 for u in allocation.values()):
        return f"allocation has {sum(allocation.values())} units, job has {job.shape.units}"
    if job.shape.single_node and len(allocation) != 1:
        return f"single-node job placed on {len(allocation)} nodes"
    if job.shape.one_unit_per_node and any(u != 1 for u in allocation.values()):
        return "job needs one unit per node (sbatch -N) but the allocation stacks units"
    return None


def check_start(
    job: JobView | None, allocation: dict[str, int], state: ClusterState, taken: dict[str, Amounts]
) -> str | None:
    """Why this start must not be applied now, or None if it can."""
    if job is None:
        return "job no longer in the queue"
    if job.state != "pending" or not job.held_for_us:
        return f"job is {job.state} and not held for cpsched"
    problem = _shape_problem(job, allocation)
    if problem:
        return problem
    for name, units in allocation.items():
        node = state.nodes.get(name)
        if node is None:
            return f"node {name} unknown to the workload manager"
        if node.state != "up":
            return f"node {name} is {node.state}"
        free = node.free()
        for resource, amount in job.shape.per_unit.items():
            need = amount * units
            have = free.get(resource, 0) - taken.get(name, {}).get(resource, 0)
            if need > have:
                return f"node {name} has {have} {resource} free, needs {need}"
    return None


def apply_decision(
    decision: DecisionOut, state: ClusterState, backend: WorkloadManager
) -> ApplyResult:
    result = ApplyResult()
    taken: dict[str, Amounts] = {}
    for start in decision.starts:
        job = state.job(start.job_id)
        why = check_start(job, start.allocation, state, taken)
        if why is not None or job is None:
            result.refused[start.job_id] = why or "unknown job"
            log.warning("start refused", extra={"job": start.job_id, "why": why})
            continue
        nodes = list(start.allocation)
        try:
            backend.start(job.id, nodes)
        except CommandError as exc:
            result.failed[job.id] = str(exc)
            log.error("start failed", extra={"job": job.id, "error": str(exc)})
            continue
        for name, units in start.allocation.items():
            row = taken.setdefault(name, {})
            for resource, amount in job.shape.per_unit.items():
                row[resource] = row.get(resource, 0) + amount * units
        result.started[job.id] = nodes
        log.info("started", extra={"job": job.id, "nodes": nodes})
    for extension in decision.extensions:
        job = state.job(extension.job_id)
        if job is None or job.state != "running":
            result.refused[extension.job_id] = "extension for a job that is not running"
            continue
        if extension.new_time_limit <= job.time_limit_s:
            # Only ever extend (operators' rule): a shorter limit would kill a job early.
            result.refused[job.id] = (
                f"new limit {extension.new_time_limit}s is not above {job.time_limit_s}s"
            )
            continue
        try:
            backend.extend(job.id, extension.new_time_limit)
        except CommandError as exc:
            result.failed[job.id] = str(exc)
            continue
        result.extended[job.id] = extension.new_time_limit
        log.info(
            "time limit extended",
            extra={"job": job.id, "limit_s": extension.new_time_limit, "reason": extension.reason},
        )
    return result
