"""A wire job as the dispatch core's :class:`~cpsched.core.Job`: its request on the
cluster's resource types, the site's rules for it, and whether it can ever start.

Used by :mod:`cpsched.runtime.codec` for every queued and running job of a snapshot, and
by the service for finished jobs (:func:`core_job`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cpsched.core import Job
from cpsched.core.capacity import units_fitting
from cpsched.core.site import (
    NO_CONSTRAINTS,
    NO_SITE,
    Constraints,
    Site,
    can_ever_run,
    parse_features,
)
from cpsched.errors import SnapshotError
from cpsched.wire.schemas import JobIn


def listed(names: Sequence[str], width: int = 100) -> str:
    """The first of ``names`` that fit in about ``width`` characters, and how many more:
    a message repeated for every job of a snapshot must not grow with the snapshot."""
    shown: list[str] = []
    used = 0
    for name in names:
        if shown and used + len(name) > width:
            break
        shown.append(name)
        used += len(name) + 2
    more = len(names) - len(shown)
    return ", ".join(shown) + (f" (and {more} more)" if more else "") if names else "none"


def unit_amounts(
    owner: str, per_unit: Mapping[str, int], index: Mapping[str, int]
) -> tuple[int, ...]:
    amounts = [0] * len(index)
    for name, amount in per_unit.items():
        if amount:
            if name not in index:
                raise SnapshotError(
                    f"{owner} asks for resource type {name!r}, which no node has "
                    f"(known types: {listed(list(index))})"
                )
            amounts[index[name]] = amount
    return tuple(amounts)


RUNS_EXCLUSIVE = Constraints(exclusive=True)


def job_partitions(wire: JobIn, site: Site) -> tuple[str, ...]:
    """The partitions a job may run in: its ``partition`` split on ``,`` when the snapshot
    declares partitions (else the field is only a label)."""
    if not site.partitions or not wire.partition:
        return ()
    names = tuple(p.strip() for p in wire.partition.split(",") if p.strip())
    unknown = [p for p in names if p not in site.partitions]
    if unknown:
        raise SnapshotError(
            f"job {wire.id!r} names partition(s) {listed([repr(p) for p in unknown])}, "
            f"which the snapshot does not declare (declared: {listed(list(site.partitions))})"
        )
    return names


def job_constraints(wire: JobIn, site: Site = NO_SITE) -> Constraints | None:
    """The site's rules for a wire job; None when none of them applies to it."""
    partitions = job_partitions(wire, site)
    if wire.reservation and all(r.name != wire.reservation for r in site.reservations):
        raise SnapshotError(
            f"job {wire.id!r} asks for reservation {wire.reservation!r}, which the snapshot "
            "does not list"
        )
    plain = (
        not partitions
        and wire.features is None
        and not wire.exclusive
        and wire.min_nodes is None
        and wire.max_nodes is None
        and wire.tasks_per_node is None
        and wire.reservation is None
        and wire.eligible
    )
    if plain:
        return None
    try:
        features = parse_features(wire.features) if wire.features is not None else None
    except SnapshotError as exc:
        raise SnapshotError(f"job {wire.id!r}: {exc}") from None
    return Constraints(
        partitions=partitions,
        features=features,
        exclusive=wire.exclusive,
        min_nodes=wire.min_nodes or 1,
        max_nodes=wire.max_nodes,
        tasks_per_node=wire.tasks_per_node,
        reservation=wire.reservation or "",
        eligible=wire.eligible,
        reason=wire.reason,
    )


def core_job(
    wire: JobIn,
    unit_request: tuple[int, ...],
    names: tuple[str, ...],
    constraints: Constraints | None = None,
) -> Job:
    """The dispatch core's job for a wire job whose request is aligned with ``names``."""
    return Job(
        id=wire.id,
        submit=wire.submit,
        time_limit=wire.time_limit,
        units=wire.units,
        unit_request=unit_request,
        user=wire.user,
        group=wire.group,
        name=wire.name,
        queue=wire.partition,
        layout=wire.layout,
        constraints=constraints,
        priority=wire.priority,
        rerunnable=wire.requeue and wire.restarts == 0,
        resource_names=names,
    )


@dataclass
class IdleMachine:
    """The snapshot's machine when idle (its nodes' ``nominal`` capacities) under the
    site's rules, with what was worked out per job shape: a queue of 100,000 jobs repeats
    a few dozen shapes."""

    site: Site
    nominal: Sequence[tuple[int, ...]]
    units: dict[tuple[tuple[int, int], ...], int] = field(default_factory=dict)
    """Units of each shape (``Job.wanted``) the whole idle machine holds."""
    runs: dict[tuple[object, ...], bool] = field(default_factory=dict)
    """Whether a shape, size and set of constraints fits within the site's rules."""

    def holds(self, job: Job) -> bool:
        if job.wanted not in self.units:
            self.units[job.wanted] = sum(units_fitting(row, job.wanted) for row in self.nominal)
        return self.units[job.wanted] >= job.units

    def runs_within_rules(self, job: Job) -> bool:
        key = (job.wanted, job.units, job.constraints)
        if key not in self.runs:
            # Size only (limit 1 s): a limit over MaxTime is held back
            # (PartitionTimeLimit), as the workload manager does, not refused.
            self.runs[key] = can_ever_run(
                job.constraints, job.units, job.unit_request, 1, self.site, self.nominal
            )
        return self.runs[key]


def never_starts(job: Job, idle: IdleMachine) -> str | None:
    """Why ``job`` can never start even on the idle machine, or None."""
    if not idle.holds(job):
        return (
            f"job {job.id!r} needs more than the whole cluster has even when idle; it can "
            "never start: resize or cancel it"
        )
    if not idle.runs_within_rules(job):
        c = job.constraints or NO_CONSTRAINTS
        where = f"in its partition(s) {', '.join(c.partitions)}" if c.partitions else "anywhere"
        counts = [f"at least {c.min_nodes} nodes"] if c.min_nodes > 1 else []
        if c.max_nodes is not None:
            counts.append(f"at most {c.max_nodes} nodes")
        if c.tasks_per_node is not None:
            counts.append(f"at most {c.tasks_per_node} per node")
        shape = f" on {', '.join(counts)}" if counts else ""
        return (
            f"job {job.id!r}: its {job.units} units do not fit{shape} {where} even when "
            "idle (nor within a partition's MaxNodes); it can never start there"
        )
    return None
