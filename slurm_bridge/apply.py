"""Apply a decision to the workload manager, checking each start against fresh state.

A start is applied only if, in the state read this cycle, the job is still pending and
held for cpsched, every chosen node exists, is up and has room (Slurm's own "allocated"
figures, minus what this cycle already started), the allocation has a shape the job
can take (one node for a single-node job, distinct nodes for a one-unit-per-node job),
and Slurm will lay it out exactly as decided. A task job started on several nodes gets
its decided cores on each (:func:`exact_split`) where the workload manager pins them
(Slurm's core reservations, ``split_pin = "reservation"``). Pinned by node list only,
Slurm splits such a job itself (:func:`slurm_split`): the start goes ahead only when
that split is the decided one whatever order Slurm allocates the waiting jobs in
(:func:`slurm_split_now`); a task job whose split depends on that order waits one
cycle (deferred), and so does one whose split a running job's end could still change
before Slurm allocates it (:func:`drifting_node`), up to the bridge's
``split_drift_wait_s``. When the split
is known but differs from the decided one (the service read the nodes a little
differently), the job is started as Slurm will split it, on the same nodes and within
the room no other start uses, and the adjustment is reported. Anything refused or
deferred stays held and is planned again next cycle.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from cpsched.slurm_bridge.backend import ExactSplit, WorkloadManager
from cpsched.slurm_bridge.eligibility import held_back
from cpsched.slurm_bridge.errors import CommandError
from cpsched.slurm_bridge.limits import SiteLimits, add_use, over_limit, usage_of
from cpsched.slurm_bridge.model import Amounts, ClusterState, JobView, NodeView
from cpsched.wire.schemas import DecisionOut

log = logging.getLogger("slurm_bridge.apply")

DRIFT = "a job ending before Slurm allocates would change the split"
"""The start of the reason a task job is deferred for (:func:`drifting_node`)."""


@dataclass
class ApplyResult:
    started: dict[str, dict[str, int]] = field(default_factory=dict)  # job → units per node
    refused: dict[str, str] = field(default_factory=dict)  # job → why
    deferred: dict[str, str] = field(default_factory=dict)  # job → why (next cycle)
    adjusted: dict[str, tuple[dict[str, int], dict[str, int]]] = field(
        default_factory=dict
    )  # job → (decided, Slurm's split it was started with)
    extended: dict[str, int] = field(default_factory=dict)  # job → new limit (s)
    failed: dict[str, str] = field(default_factory=dict)  # job → command error

    def drifting(self) -> list[str]:
        """The jobs deferred because a running job's end could change their split."""
        return [job for job, why in self.deferred.items() if why.startswith(DRIFT)]


def _shape_problem(job: JobView, allocation: dict[str, int]) -> str | None:
    if sum(allocation.values()) != job.shape.units or any(u <= 0 for u in allocation.values()):
        return f"allocation has {sum(allocation.values())} units, job has {job.shape.units}"
    if job.shape.single_node and len(allocation) != 1:
        return f"single-node job placed on {len(allocation)} nodes"
    if job.shape.one_unit_per_node and any(u != 1 for u in allocation.values()):
        return "job needs one unit per node (sbatch -N) but the allocation stacks units"
    return None


def _partition_problem(job: JobView, allocation: dict[str, int], state: ClusterState) -> str | None:
    """Whether the nodes lie outside every partition the job may run in."""
    names = [p for p in job.partition.split(",") if p in state.partitions]
    if not names:
        return None  # partitions not read (or none of the job's): Slurm checks them
    if any(set(allocation) <= set(state.partitions[p].nodes) for p in names):
        return None
    return f"nodes {', '.join(allocation)} are not within one of its partitions {job.partition}"


def _partition_to_run_in(
    job: JobView, allocation: Mapping[str, int], state: ClusterState
) -> str | None:
    """For a job submitted to several partitions, the first that holds all its nodes."""
    names = [p for p in job.partition.split(",") if p]
    if len(names) < 2:
        return None
    for name in names:
        partition = state.partitions.get(name)
        if partition is not None and set(allocation) <= set(partition.nodes):
            return name
    return None


def node_order(state: ClusterState) -> dict[str, int]:
    """Each node's rank in Slurm's node table (the order ``sinfo --json`` lists them in,
    which is the order sent to the service)."""
    return {name: rank for rank, name in enumerate(state.nodes)}


def slurm_split(units: int, fits: dict[str, int], order: dict[str, int]) -> dict[str, int]:
    """How Slurm splits ``units`` tasks of a job pinned to the nodes of ``fits`` (each
    with the tasks that fit there): one task on every node, then the rest filling the
    nodes in Slurm's node order, each up to what fits (checked on the test bed). The
    service's block layout (``cpsched.core.layout``) decides the same split."""
    left = units - len(fits)
    split: dict[str, int] = {}
    for name in sorted(fits, key=order.__getitem__):
        extra = max(0, min(fits[name] - 1, left))
        left -= extra
        split[name] = 1 + extra
    return split


def _fits(job: JobView, free: Amounts) -> int:
    return min(free.get(r, 0) // a for r, a in job.shape.per_unit.items() if a > 0)


def _room(node: NodeView, taken: dict[str, Amounts]) -> Amounts:
    return _less(node.free(), taken.get(node.name, {}))


def _less(have: Amounts, taken: Amounts) -> Amounts:
    return {r: amount - taken.get(r, 0) for r, amount in have.items()}


def check_start(
    job: JobView | None, allocation: dict[str, int], state: ClusterState, taken: dict[str, Amounts]
) -> str | None:
    """Why this start must not be applied now, or None if it can."""
    if job is None:
        return "job no longer in the queue"
    if job.state != "pending" or not job.held_for_us:
        return f"job is {job.state} and not held for cpsched"
    held = held_back(job, state.time)
    if held is not None:
        return f"Slurm holds it back ({held}); never released while so"
    problem = _shape_problem(job, allocation) or _partition_problem(job, allocation, state)
    if problem:
        return problem
    for name, units in allocation.items():
        node = state.nodes.get(name)
        if node is None:
            return f"node {name} unknown to the workload manager"
        if node.state != "up":
            return f"node {name} is {node.state}"
        room = _room(node, taken)
        for resource, amount in job.shape.per_unit.items():
            need = amount * units
            have = room.get(resource, 0)
            if need > have:
                return f"node {name} has {have} {resource} free, needs {need}"
    return None


def _add(taken: dict[str, Amounts], job: JobView, allocation: Mapping[str, int], sign: int) -> None:
    for name, units in allocation.items():
        row = taken.setdefault(name, {})
        for resource, amount in job.shape.per_unit.items():
            row[resource] = row.get(resource, 0) + sign * amount * units


def _sum(*parts: dict[str, Amounts]) -> dict[str, Amounts]:
    total: dict[str, Amounts] = {}
    for part in parts:
        for name, row in part.items():
            into = total.setdefault(name, {})
            for resource, amount in row.items():
                into[resource] = into.get(resource, 0) + amount
    return total


def slurm_split_now(
    job: JobView,
    allocation: dict[str, int],
    state: ClusterState,
    *,
    promised: dict[str, Amounts],
    beside: dict[str, Amounts],
) -> dict[str, int] | None:
    """The split Slurm will give this task job on the decided nodes, or None when it
    depends on the order Slurm allocates the waiting jobs in.

    ``promised`` is held by jobs released in earlier cycles and not running yet;
    ``beside`` by this cycle's other starts. Slurm allocates the released jobs that wait
    in its own priority order, those of earlier cycles included: the split is known only
    if it comes out the same whether it allocates this job before all of them or after
    all of them (then in any order: the split is monotone in each node's room).
    """
    last = _split_in(job, allocation, state, _sum(promised, beside), ended=False)
    return last if _split_in(job, allocation, state, {}, ended=False) == last else None


def drifting_node(
    job: JobView,
    split: dict[str, int],
    state: ClusterState,
    *,
    promised: dict[str, Amounts],
    beside: dict[str, Amounts],
) -> str | None:
    """A node of ``split`` whose room could still grow and change it, or None.

    Slurm allocates a released job a second or two after the state was read; a job
    ending on one of its nodes meanwhile leaves more room there, and Slurm's split fills
    it. The split cannot change if it comes out the same with every running job on its
    nodes ended (what released jobs and this cycle's starts hold stays): the split is
    monotone in each node's room, so no partial ending changes it either."""
    grown = _split_in(job, split, state, _sum(promised, beside), ended=True)
    order = node_order(state)
    return next((n for n in sorted(split, key=order.__getitem__) if grown[n] != split[n]), None)


def _split_in(
    job: JobView,
    allocation: Mapping[str, int],
    state: ClusterState,
    held: dict[str, Amounts],
    *,
    ended: bool,
) -> dict[str, int]:
    """Slurm's split of ``job`` on the nodes of ``allocation``, each with its room less
    ``held``; with ``ended``, the room as if every running job there had ended."""
    per_node = job.rules.tasks_per_node  # Slurm's split keeps that rule
    most = job.shape.units_of_tasks(per_node) if per_node else job.shape.units
    fits = {}
    for name in allocation:
        node = state.nodes[name]
        room = _room(node, held) if not ended else _less(node.capacity, held.get(name, {}))
        fits[name] = min(_fits(job, room), most)
    return slurm_split(job.shape.units, fits, node_order(state))


def _task_split(
    job: JobView,
    allocation: dict[str, int],
    state: ClusterState,
    promised: dict[str, Amounts],
    beside: dict[str, Amounts],
    leaving: Mapping[str, str],
    may_drift: bool,
) -> tuple[dict[str, int] | None, str]:
    """The split a task job pinned to these nodes will run with, or None and why it
    must wait a cycle. A split other than the decided one means the service read the
    nodes a little differently (its figures are this bridge's reading of Slurm's):
    Slurm's split, on the same nodes and within the room no other start uses, is what
    will run, so the job is started as that (and the adjustment reported). ``leaving``
    maps each node to a job still completing there: the room grows any moment, and
    Slurm's split with it (a cycle woken by a job's end sees exactly this). A split that
    a running job's end could still change (:func:`drifting_node`) waits too, unless
    ``may_drift`` (it has waited long enough)."""
    ending = next((leaving[n] for n in allocation if n in leaving), None)
    if ending is not None:
        return None, f"job {ending} is leaving its nodes; the split would change"
    split = slurm_split_now(job, allocation, state, promised=promised, beside=beside)
    if split is None:
        return None, "Slurm's split depends on the jobs starting beside it; waits for them"
    if not may_drift:
        node = drifting_node(job, split, state, promised=promised, beside=beside)
        if node is not None:
            return None, f"{DRIFT} (on {node})"
    return split, ""


def _untriable(job: JobView, backend: WorkloadManager) -> str | None:
    """Why a trial run of ``job`` must not start (None: it may): the bridge would have
    to put it back in the queue, and may only where the workload manager lets it."""
    if not backend.ends_trials:
        return f"a trial run, and this bridge cannot put a {backend.name} job back in its queue"
    if not job.requeue:
        return "a trial run of a job that may not be requeued (Slurm's --no-requeue, PBS's -r n)"
    if job.restarts:
        return "a trial run of a job that went back to the queue before"
    return None


def apply_decision(
    decision: DecisionOut,
    state: ClusterState,
    backend: WorkloadManager,
    starting: Mapping[str, Mapping[str, int]] | None = None,
    may_drift: Collection[str] = (),
    unpinned: Collection[str] = (),
) -> ApplyResult:
    """Apply the decision's starts and extensions; ``starting`` are jobs released in
    earlier cycles that Slurm has not run yet (job → units per node): their resources
    are not in Slurm's figures yet, but are promised. Task jobs in ``may_drift``, and
    starts the service marks ``may_drift``, start even if a running job's end could still
    change their split (they waited for a steady moment long enough: here, or in the
    service, which holds such a job back for its policy's ``split_wait``). ``unpinned``:
    jobs whose pin reservation was taken off this cycle (the state read before still
    shows it); a job still in its pin is not extended."""
    result = ApplyResult()
    promised: dict[str, Amounts] = {}  # released earlier, not running yet
    limits = state.limits or SiteLimits()
    used = usage_of(state.jobs)  # of Slurm's limits (released jobs in), and this cycle's starts
    for job_id, allocation in (starting or {}).items():
        pending = state.job(job_id)
        if pending is not None and pending.state == "pending" and not pending.held_for_us:
            _add(promised, pending, allocation, 1)
    started_here: dict[str, Amounts] = {}  # what this cycle started so far
    upcoming: dict[str, Amounts] = {}  # this cycle's starts not yet applied
    for start in decision.starts:
        if (other := state.job(start.job_id)) is not None:
            _add(upcoming, other, start.allocation, 1)
    order = node_order(state)
    leaving = {n: j.id for j in state.running if j.ending for n in j.allocation}
    for start in decision.starts:
        job = state.job(start.job_id)
        if job is not None:
            _add(upcoming, job, start.allocation, -1)
        why = check_start(job, start.allocation, state, _sum(promised, started_here))
        if why is None and job is not None and (over := over_limit(job, limits, used)):
            why = f"Slurm would hold it back ({over}) beside the jobs started before it"
        if why is None and job is not None and start.trial_s is not None:
            why = _untriable(job, backend)
        if why is not None or job is None:
            result.refused[start.job_id] = why or "unknown job"
            log.warning("start refused", extra={"job": start.job_id, "why": why})
            continue
        split_by_slurm = job.split_by_manager(
            state.partitions, splits_tasks=backend.splits_tasks, pins_splits=backend.pins_splits
        )
        if split_by_slurm and len(start.allocation) > 1:
            split, why = _task_split(
                job,
                start.allocation,
                state,
                promised,
                _sum(started_here, upcoming),
                leaving,
                start.may_drift or job.id in may_drift,
            )
            if split is None:
                result.deferred[job.id] = why
                log.info("start deferred", extra={"job": job.id, "why": why})
                continue
            if split != start.allocation:
                result.adjusted[job.id] = (dict(start.allocation), split)
                log.warning(
                    "start adjusted to Slurm's split",
                    extra={"job": job.id, "decided": start.allocation, "split": split},
                )
                start = start.model_copy(update={"allocation": split})
        in_order = {n: start.allocation[n] for n in sorted(start.allocation, key=order.__getitem__)}
        partition = _partition_to_run_in(job, start.allocation, state)
        pin = backend.pins_splits and not split_by_slurm
        try:
            backend.start(
                job.id,
                in_order,
                cpus_per_node=job.shape.cpus_per_node,
                partition=partition,
                exact=exact_split(job, in_order, state, partition) if pin else None,
            )
        except CommandError as exc:
            result.failed[job.id] = str(exc)
            log.error("start failed", extra={"job": job.id, "error": str(exc)})
            continue
        _add(started_here, job, start.allocation, 1)
        add_use(used, job)
        result.started[job.id] = dict(start.allocation)
        log.info("started", extra={"job": job.id, "allocation": start.allocation})
    _apply_extensions(decision, state, backend, result, unpinned)
    return result


def exact_split(
    job: JobView, allocation: Mapping[str, int], state: ClusterState, partition: str | None
) -> ExactSplit | None:
    """The cores a task job started on several nodes must hold on each, or None for a
    job whose split is not Slurm's to choose (one node, or ``-N k``); ``partition``: the
    one of several it is started in, if it was chosen."""
    cpus = job.shape.per_unit.get("cpu", 0)
    if not job.shape.laid_out_by_slurm or len(allocation) < 2 or cpus <= 0:
        return None
    cores = {n: -(-units * cpus // state.nodes[n].cpus_per_core) for n, units in allocation.items()}
    if partition is None:  # its only partition, or (several) Slurm's default one
        partition = job.partition if "," not in job.partition else ""
    return ExactSplit(user=job.user, cores=cores, partition=partition, limit_s=job.time_limit_s)


def _apply_extensions(
    decision: DecisionOut,
    state: ClusterState,
    backend: WorkloadManager,
    result: ApplyResult,
    unpinned: Collection[str],
) -> None:
    for extension in decision.extensions:
        job = state.job(extension.job_id)
        if job is None or job.state != "running":
            result.refused[extension.job_id] = "extension for a job that is not running"
            continue
        if job.pin and job.id not in unpinned:
            # Slurm would end it with its pin: extended once the pin is off (next cycle).
            result.deferred[job.id] = "still in its pin reservation; extended once off it"
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
