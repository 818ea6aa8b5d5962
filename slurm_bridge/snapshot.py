"""ClusterState → the service's wire types (DispatchRequest, FinishedJobIn)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from pydantic import ValidationError

from cpsched.slurm_bridge.eligibility import held_back
from cpsched.slurm_bridge.model import ClusterState, JobView, NodeView, PartitionView
from cpsched.wire.schemas import (
    DispatchRequest,
    FinishedJobIn,
    JobIn,
    NodeIn,
    PartitionIn,
    ReservationIn,
    RunningJobIn,
    end_state,
)

log = logging.getLogger("slurm_bridge.snapshot")
_Wire = TypeVar("_Wire", RunningJobIn, JobIn)


def _per_unit(job: JobView) -> dict[str, int]:
    return {r: a for r, a in job.shape.per_unit.items() if a > 0}


def _rule_fields(job: JobView, state: ClusterState, declared: set[str]) -> dict[str, Any]:
    """A queued job's site rules as wire fields (only those that say something); its
    ``partition`` names only the partitions the snapshot declares."""
    rules, shape = job.rules, job.shape
    names = [p for p in job.partition.split(",") if p in declared]
    fields: dict[str, Any] = {"partition": ",".join(names)}
    if rules.features:
        fields["features"] = rules.features
    if job.takes_whole_nodes(state.partitions):
        fields["exclusive"] = True
    if shape.one_unit_per_node:
        # a unit is one node's share (sbatch -N k): exactly k nodes, one unit each
        fields.update(min_nodes=shape.units, max_nodes=shape.units, tasks_per_node=1)
    elif not shape.single_node:
        per_node = rules.tasks_per_node
        fields.update(
            {
                k: v
                for k, v in (
                    ("min_nodes", rules.min_nodes),
                    ("max_nodes", rules.max_nodes),
                    ("tasks_per_node", shape.units_of_tasks(per_node) if per_node else None),
                )
                if v is not None
            }
        )
    if rules.reservation:
        fields["reservation"] = rules.reservation
    if rules.qos:
        fields["qos"] = _label(rules.qos)  # shown on the dashboard's queue
    if job.priority > 0:
        # Slurm's own (multifactor) priority; for a job held for cpsched (0 in Slurm) the
        # one the bridge computed as Slurm's multifactor plugin would (site_priority.py).
        fields["priority"] = job.priority
    why = held_back(job, state.time)
    if why is not None:
        fields.update(eligible=False, reason=_label(why))
    return fields


_FEATURE = re.compile(r"^[A-Za-z0-9_.:+/-]{1,128}$")


def _features(node: NodeView, notes: list[str]) -> list[str]:
    good = [f for f in node.features if _FEATURE.match(f)]
    if len(good) < len(node.features):
        notes.append(f"node {node.name}: features not sent (unusual characters)")
    return good


def _site(state: ClusterState) -> dict[str, Any]:
    """The partitions and reservations on the managed nodes (those in the snapshot)."""
    managed = state.nodes
    partitions = [
        PartitionIn(
            name=p.name,
            nodes=[n for n in p.nodes if n in managed],
            max_time=p.max_time_s,
            max_nodes=p.max_nodes,
        )
        for p in state.partitions.values()
        if any(n in managed for n in p.nodes)
    ]
    reservations = [
        ReservationIn(
            name=r.name, nodes=[n for n in r.nodes if n in managed], start=r.start, end=r.end
        )
        for r in state.reservations
        if r.end > state.time and any(n in managed for n in r.nodes) and r.end > r.start
    ]
    return {"partitions": partitions, "reservations": reservations}


USER_NAME_MAX = 256
"""The wire's bound on a user name (``wire.schemas.UserName``)."""

_CONTROL = dict.fromkeys([*range(32), 127], "\ufffd")
del _CONTROL[ord("\t")]


def _label(text: str, limit: int = 1024) -> str:
    """A name as a snapshot carries it: labels only feed predictions, so a control
    character (which the wire refuses) is replaced, and a name past the wire's bound
    (``limit``: 1,024, user names 256) cut, rather than the job left out."""
    return text.translate(_CONTROL)[:limit]


def _job_fields(
    job: JobView,
    partitions: Mapping[str, PartitionView] | None = None,
    *,
    splits_tasks: bool = False,
    pins_splits: bool = False,
    exact: bool = False,
) -> dict:
    """A job's wire fields; ``exact`` keeps its names as they are (a finished job's
    record: the service refuses it rather than store a changed name)."""
    label = (lambda text: text) if exact else _label
    partition = label(job.partition)
    split = job.split_by_manager(
        partitions or {}, splits_tasks=splits_tasks, pins_splits=pins_splits
    )
    return {
        "id": job.id,
        "user": job.user if exact else _label(job.user, USER_NAME_MAX),
        "group": label(job.group),
        "name": label(job.name),
        "partition": partition,
        "submit": job.submit,
        "time_limit": job.time_limit_s,
        "units": job.shape.units,
        "per_unit": _per_unit(job),
        "layout": "block" if split else "any",
    }


def _held_by(running: list[RunningJobIn]) -> dict[str, dict[str, int]]:
    """What the snapshot's running jobs hold on each node (one pass over them)."""
    held: dict[str, dict[str, int]] = {}
    for job in running:
        for node, units in job.allocation.items():
            row = held.setdefault(node, {})
            for resource, amount in job.per_unit.items():
                row[resource] = row.get(resource, 0) + amount * units
    return held


def _held_outside(node: NodeView, known: Mapping[str, int]) -> dict[str, int]:
    """What jobs the snapshot does not carry hold on a node (jobs of partitions left to
    Slurm, jobs still completing): the service must not count on it now, but it is still
    the node's own when the service judges whether a job could ever start. ``known`` is
    what the snapshot's running jobs hold there."""
    held: dict[str, int] = {}
    for resource, capacity in node.capacity.items():
        outside = node.used.get(resource, 0) - known.get(resource, 0)
        if outside > 0:
            held[resource] = min(outside, capacity)
    return held


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
    starting: Mapping[str, tuple[int, Mapping[str, int]]] | None = None,
    splits_tasks: bool = True,
    pins_splits: bool = False,
    left_out: dict[str, str] | None = None,
    trials: Mapping[str, int] | None = None,
    ends_trials: bool = False,
) -> tuple[DispatchRequest, list[str]]:
    """The snapshot to post, and notes on jobs left out (and why).

    Nodes go in the workload manager's own order (``sinfo --json``'s), which the block
    layout of task jobs follows. ``starting`` are the jobs released onto their nodes
    but not running yet (job → release time and units per node): they are sent as
    running there, so that nothing is promised twice while Slurm starts them.
    ``trials``: the jobs started for a trial run → its seconds (sent with the trial's
    end); ``ends_trials``: the workload manager can end trials (the bridge puts a job
    back held), so the jobs it may requeue are sent as such, and may be tried.

    One job the wire cannot carry (its allocation does not add up, a field out of
    bounds) is left out, never the snapshot: it is noted, and put in ``left_out`` (job →
    why) when given. A running one left out still holds its nodes through Slurm's own
    use figures; a starting one through the use it was sent with before.
    """
    notes: list[str] = []
    skipped: dict[str, str] = {} if left_out is None else left_out
    running: list[RunningJobIn] = []

    def carried(job_id: str, what: str, model: type[_Wire], fields: dict[str, Any]) -> _Wire | None:
        try:
            return model(**fields)
        except ValidationError as exc:
            why = _first_error(exc)
            skipped[job_id] = why
            notes.append(f"{what} job {job_id}: {why}; left out")
            return None

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
        fields = {
            **_job_fields(job),
            "start": job.start,
            "allocation": dict(job.allocation),
            "extensions": extensions.get(job.id, 0),
            "exclusive": job.takes_whole_nodes(state.partitions),
            **_trial_end(job.id, job.start, trials),
        }
        wire = carried(job.id, "running", RunningJobIn, fields)
        if wire is not None:
            running.append(wire)
    # What Slurm counts on each node but the snapshot does not carry, from the jobs Slurm
    # runs (not from the starting ones below, which Slurm does not count yet).
    held = _held_by(running)
    nodes = [
        NodeIn(
            name=n.name,
            resources=dict(n.capacity),
            held_outside=_held_outside(n, held.get(n.name, {})),
            state=n.state,
            features=_features(n, notes),
        )
        for n in state.nodes.values()
    ]
    for job_id, (since, allocation) in (starting or {}).items():
        pending = state.job(job_id)
        if pending is None or pending.state != "pending" or pending.held_for_us or not allocation:
            continue  # running (read above), gone, held again, or pinned by an old version
        if any(n not in state.nodes for n in allocation):
            notes.append(f"starting job {job_id}: on unknown nodes; left out")
            continue
        fields = {
            **_job_fields(pending),
            "start": min(since, state.time),
            "allocation": dict(allocation),
            "extensions": extensions.get(job_id, 0),
            **_trial_end(job_id, min(since, state.time), trials),
        }
        wire = carried(job_id, "starting", RunningJobIn, fields)
        if wire is not None:
            running.append(wire)
    site = _site(state)
    declared = {p.name for p in site["partitions"]}
    queued: list[JobIn] = []
    for job in queued_jobs(state, shadow=shadow):
        fields = {
            **_job_fields(
                job, state.partitions, splits_tasks=splits_tasks, pins_splits=pins_splits
            ),
            **_rule_fields(job, state, declared),
            **({"requeue": True} if ends_trials and job.requeue else {}),
            **({"restarts": job.restarts} if job.restarts else {}),
        }
        wire_job = carried(job.id, "queued", JobIn, fields)
        if wire_job is not None:
            queued.append(wire_job)
    return (
        DispatchRequest(
            time=state.time, nodes=nodes, running=running, queued=queued, dry_run=shadow, **site
        ),
        notes,
    )


def _trial_end(job_id: str, start: int, trials: Mapping[str, int] | None) -> dict[str, int]:
    """A running (or starting) job's ``trial_end`` field, when it runs a trial."""
    seconds = (trials or {}).get(job_id)
    return {"trial_end": start + seconds} if seconds else {}


def _first_error(exc: ValidationError) -> str:
    """The first of a validation's errors, as one line (its field and message)."""
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error.get("loc", ()))
    return f"{where}: {error['msg']}" if where else str(error["msg"])


def finished_batch(jobs: Iterable[JobView]) -> tuple[list[FinishedJobIn], dict[str, str]]:
    """Ended jobs in wire form, and those the wire schema refuses (job → why), which the
    service would refuse too; jobs without a usable start/end are skipped."""
    out: list[FinishedJobIn] = []
    refused: dict[str, str] = {}
    for job in jobs:
        if job.start is None or job.end is None:
            continue
        try:
            out.append(
                FinishedJobIn(
                    **_job_fields(job, exact=True),
                    start=job.start,
                    end=job.end,
                    state=end_state(job.state),
                )
            )
        except ValidationError as exc:
            refused[job.id] = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
            )
    return out, refused
